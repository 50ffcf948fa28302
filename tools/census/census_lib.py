"""Pure functions of the census of Caffe net files (see docs/census.md for the method).

Everything that decides *which* repositories and files are in the census lives here, so the rules
can be tested without a network or a fetched repository:

* ``order_key(repo)``: the sampling order, sha256("caffepy-census-1:" + repo) in hex. The frame is
  walked in ascending order of this key, which is a random order fixed before any file is read.
* ``is_heldout(repo)``: a random fifth of the repositories, int(sha256("caffepy-census-heldout-1:"
  + repo), 16) % 5 == 0. Their files are measured, but only aggregate tier percentages of them are
  ever reported: nobody looks at them, so they stay an unbiased check on fixes tuned on the rest.
* ``is_net_text(text)``: a net file is one with a ``layer {`` or ``layers {`` block (solvers are not).
* ``choose_files(repo, paths, k)``: at most k files per repository, the first k by
  sha256(repo + ":" + path), so a repository with hundreds of nets does not dominate the census.
* manifest / fetched / duplicates / pymods tables: tab-separated, one header line, read and
  written here.
"""
import collections
import hashlib
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.environ.get("CENSUS_DATA", "/work/census-data")
CACHE = os.path.join(DATA, "files")
MANIFEST = os.path.join(HERE, "manifest.tsv")
FETCHED = os.path.join(HERE, "fetched.tsv")
DUPLICATES = os.path.join(HERE, "duplicates.tsv")
FRAME = os.path.join(HERE, "frame.tsv")
PYMODS = os.path.join(HERE, "pymods.tsv")
PY_DIR = os.path.join(DATA, "py")

MAX_FILES_PER_REPO = 10
MAX_BYTES = 2 * 1024 * 1024
NET_RE = re.compile(r"\blayers?\s*\{")
EXTENSIONS = (".prototxt", ".pt")
MAX_PY_BYTES = 256 * 1024             # a repository's .py files kept: each at most this,
MAX_PY_FILES = 2000                   # at most this many,
MAX_PY_TOTAL = 8 * 1024 * 1024        # and at most this much in all

MANIFEST_COLUMNS = ("repo", "path", "commit", "sha256", "split", "bytes")
FETCHED_COLUMNS = ("repo", "commit", "net_files", "kept", "duplicates", "modelzoo", "status")
DUPLICATE_COLUMNS = ("repo", "path", "commit", "sha256", "first_repo")
FRAME_COLUMNS = ("order_key", "repo", "commit", "query", "split")
PYMOD_COLUMNS = ("repo", "commit", "module", "path", "sha256", "root", "status")


def sha256_hex(data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def order_key(repo):
    """The repository's place in the sampling order (ascending hex)."""
    return sha256_hex("caffepy-census-1:" + repo)


def is_heldout(repo):
    """True for the random fifth of repositories whose files nobody may look at."""
    return int(sha256_hex("caffepy-census-heldout-1:" + repo), 16) % 5 == 0


def split_of(repo):
    return "heldout" if is_heldout(repo) else "census"


def is_candidate_path(path):
    return path.lower().endswith(EXTENSIONS)


def strip_comments(text):
    """The text without ``#`` comments (outside quoted strings), so a commented-out block does
    not make a file a net."""
    out = []
    for line in text.splitlines():
        if "#" in line:
            q, cut = None, None
            for i, ch in enumerate(line):
                if q:
                    if ch == "\\":
                        continue
                    if ch == q:
                        q = None
                elif ch in "\"'":
                    q = ch
                elif ch == "#":
                    cut = i
                    break
            if cut is not None:
                line = line[:cut]
        out.append(line)
    return "\n".join(out)


def is_net_text(text):
    """A net file has a ``layer {`` / ``layers {`` block (outside comments)."""
    return bool(NET_RE.search(strip_comments(text)))


def choose_files(repo, paths, k=MAX_FILES_PER_REPO):
    """At most k of ``paths``: the first k by sha256(repo + ":" + path)."""
    return sorted(paths, key=lambda p: sha256_hex(repo + ":" + p))[:k]


def read_table(path, columns):
    """Rows (dicts) of a tab-separated table with a header line; [] when it does not exist."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if tuple(header) != tuple(columns):
            raise ValueError("%s: header %r, expected %r" % (path, header, columns))
        for line in f:
            if line.strip():
                rows.append(dict(zip(columns, line.rstrip("\n").split("\t"))))
    return rows


def append_rows(path, columns, rows):
    """Append rows (dicts) to a table, writing the header when the file is new."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", encoding="utf-8") as f:
        if new:
            f.write("\t".join(columns) + "\n")
        for r in rows:
            values = [str(r[c]) for c in columns]
            if any("\t" in v or "\n" in v for v in values):
                raise ValueError("a tab or newline in %r" % (values,))
            f.write("\t".join(values) + "\n")


def write_table(path, columns, rows):
    if os.path.exists(path):
        os.remove(path)
    append_rows(path, columns, rows)


def cache_path(sha, cache=None):
    return os.path.join(cache or CACHE, sha + ".prototxt")


def excluded_repos(root=ROOT):
    """Repositories the project already used (its model zoo and its earlier survey) and BVLC/caffe:
    not part of the frame. Compared case-insensitively (GitHub names are)."""
    out = {"bvlc/caffe"}
    zoo = os.path.join(os.path.dirname(root), "shared", "modelzoo", "SOURCES.tsv")
    if not os.path.exists(zoo):
        zoo = os.path.join(root, "shared", "modelzoo", "SOURCES.tsv")
    if os.path.exists(zoo):
        with open(zoo, encoding="utf-8") as f:
            header = f.readline().rstrip("\n").split("\t")
            i = header.index("repo")
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) > i:
                    out.add(parts[i].lower())
    survey = os.path.join(root, "tools", "survey", "repos.tsv")
    if os.path.exists(survey):
        with open(survey, encoding="utf-8") as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    out.add(line.split("\t")[0].lower())
    return out


def modelzoo_hashes(root=ROOT):
    """sha256 of every file in ../shared/modelzoo: copies of these are not census files."""
    zoo = os.path.join(os.path.dirname(root), "shared", "modelzoo")
    out = set()
    for base, _, files in os.walk(zoo):
        for name in files:
            with open(os.path.join(base, name), "rb") as f:
                out.add(sha256_hex(f.read()))
    return out


def repository_files(manifest, duplicates):
    """{repo: {path: sha256}}: every cached census file each repository holds, kept (manifest)
    or a copy of a file another repository kept (duplicates.tsv)."""
    out = collections.defaultdict(dict)
    for row in list(manifest) + list(duplicates):
        out[row["repo"]][row["path"]] = row["sha256"]
    return out


class RepositoryTrees(object):
    """Each repository's cached net files laid out at their paths under ``root`` (symbolic links
    to the cache), made when a file of it is first measured: a file is measured where its
    repository has it, beside the files the census holds of that directory (the input-size
    search reads the sizes its neighbours declare, caffepy.zoo.candidates.family_sizes). A path
    that is absolute or climbs out (``..``) keeps the file in the cache."""

    def __init__(self, files, root, cache=CACHE):
        self.files, self.root, self.cache, self.made = files, root, cache, set()

    def _where(self, repo, path):
        parts = path.replace("\\", "/").split("/")
        if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
            return None
        return os.path.join(self.root, repo.replace("/", "+"), *parts)

    def path_of(self, row):
        repo = row["repo"]
        if repo not in self.made:
            self.made.add(repo)
            for path, sha in sorted(self.files.get(repo, {}).items()):
                where = self._where(repo, path)
                source = cache_path(sha, self.cache)
                if where is None or not os.path.exists(source) or os.path.lexists(where):
                    continue
                try:
                    os.makedirs(os.path.dirname(where), exist_ok=True)
                    os.symlink(source, where)
                except OSError:
                    continue
        where = self._where(repo, row["path"])
        if where is not None and os.path.realpath(where) == os.path.realpath(
                cache_path(row["sha256"], self.cache)):
            return where
        return cache_path(row["sha256"], self.cache)


def share_interval(records, tier="complete", resamples=2000, seed=0, level=0.95):
    """How far a tier's share could move with another draw of repositories: the census samples
    repositories, and a repository's files pass or fail together more often than apart, so the
    file-weighted share (files in the tier / files) and the repository-weighted one (the mean of
    each repository's own share) get percentile intervals from a bootstrap over repositories
    (``resamples`` draws of as many repositories, with replacement; ``random.Random(seed)``).
    Returns {"files": (share, low, high), "repositories": (share, low, high)} in percent."""
    import random
    by_repo = collections.OrderedDict()
    for r in records:
        by_repo.setdefault(r["repo"], []).append(1 if r.get(tier) else 0)
    repos = list(by_repo)
    if not repos:
        return {}

    def shares(names):
        files = [v for n in names for v in by_repo[n]]
        per_repo = [sum(by_repo[n]) / float(len(by_repo[n])) for n in names]
        return 100.0 * sum(files) / len(files), 100.0 * sum(per_repo) / len(per_repo)

    rng = random.Random(seed)
    draws = [shares([rng.choice(repos) for _ in repos]) for _ in range(resamples)]
    lo_i = int(round((1 - level) / 2 * (resamples - 1)))
    hi_i = int(round((1 + level) / 2 * (resamples - 1)))
    point = shares(repos)
    out = {}
    for k, name in enumerate(("files", "repositories")):
        values = sorted(d[k] for d in draws)
        out[name] = (round(point[k], 1), round(values[lo_i], 1), round(values[hi_i], 1))
    return out
