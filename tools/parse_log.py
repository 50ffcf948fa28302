#!/usr/bin/env python3
"""Parse a Caffe / caffepy training log into CSV files, as Caffe's tools/extra/parse_log.py.

    tools/parse_log.py LOGFILE OUTPUT_DIR [--delimiter ,] [--verbose]

writes OUTPUT_DIR/<basename of LOGFILE>.train and .test: one row per display iteration (train) or
test pass (test), columns NumIters, Seconds (since the "Solving" line), LearningRate, then one
column per net output (loss, accuracy, ...). A file with no rows is not written.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from caffepy.log import parse_training_log, write_csv  # noqa: E402


def save_csv_files(logfile_path, output_dir, train_rows, test_rows, delimiter=",", verbose=False):
    base = os.path.basename(logfile_path)
    for suffix, rows in ((".train", train_rows), (".test", test_rows)):
        path = os.path.join(output_dir, base + suffix)
        if write_csv(path, rows, delimiter):
            if verbose:
                print("Wrote %s" % path)
        elif verbose:
            print("Not writing %s; no lines to write" % path)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Parse a Caffe training log into two CSV files")
    parser.add_argument("logfile_path", help="Path to log file")
    parser.add_argument("output_dir", help="Directory in which to place output CSV files")
    parser.add_argument("--verbose", action="store_true", help="Print some extra info (e.g., output filenames)")
    parser.add_argument("--delimiter", default=",", help="Column delimiter in output files (default: '%(default)s')")
    args = parser.parse_args(argv)
    try:
        train_rows, test_rows = parse_training_log(args.logfile_path)
    except (OSError, ValueError) as e:
        sys.stderr.write("parse_log.py: error: %s\n" % e)
        return 1
    save_csv_files(args.logfile_path, args.output_dir, train_rows, test_rows, args.delimiter, args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
