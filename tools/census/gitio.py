"""Reading a fetched bare git repository without a work tree (the census's collection steps)."""
import subprocess


def git(mirror, *args, data=None):
    return subprocess.run(["git", "--git-dir=" + mirror] + list(args), input=data,
                          capture_output=True, check=True).stdout


def has_commit(mirror, commit):
    """True when the snapshot holds ``commit`` as a commit object."""
    return subprocess.run(["git", "--git-dir=" + mirror, "cat-file", "-e", commit + "^{commit}"],
                          capture_output=True).returncode == 0


def ls_tree(mirror, commit, keep):
    """[(path, blob sha, size or None)] of the blobs at ``commit`` whose path ``keep`` accepts;
    size None: the snapshot lacks the blob (4 MB and more). Paths with a tab or newline are left
    out (the tables cannot hold them)."""
    out = git(mirror, "ls-tree", "-r", "-l", "-z", commit)
    rows = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, sha, size = meta.split()
        path = path.decode("utf-8", "replace")
        if kind != b"blob" or "\t" in path or "\n" in path or not keep(path):
            continue
        rows.append((path, sha.decode(), int(size) if size.isdigit() else None))
    return rows


def read_blobs(mirror, shas):
    """{blob sha: bytes} via one ``git cat-file --batch`` (missing blobs are left out)."""
    if not shas:
        return {}
    out = git(mirror, "cat-file", "--batch", data=("\n".join(shas) + "\n").encode())
    blobs, i = {}, 0
    while i < len(out):
        nl = out.index(b"\n", i)
        header = out[i:nl].split()
        i = nl + 1
        if len(header) < 3 or header[1] == b"missing":
            continue
        size = int(header[2])
        blobs[header[0].decode()] = out[i:i + size]
        i += size + 1
    return blobs
