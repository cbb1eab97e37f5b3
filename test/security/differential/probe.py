# The differential tier's probe (test/security/differential/): run inside a real sandbox, read operations as one
# JSON array on stdin, try each, print one JSON line per operation: {"id", "ok", "errno"?, "dirty"?}.
# Every operation puts back what it changed (same mode, same size, renamed back, created entries removed), so the
# next one sees the layout as it was; "dirty" says when that failed. Nothing is written: write opens for append,
# truncate keeps the size, chmod/chown/utime keep the mode, owner and times.
import errno, json, os, sys


def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def created_dirs(path, made):
    """Make the missing folders above `path`, appending each to `made` (deepest last) as it is made."""
    d = os.path.dirname(path)
    missing = []
    while not os.path.lexists(d):
        missing.append(d)
        d = os.path.dirname(d)
    for m in reversed(missing):
        os.mkdir(m)
        made.append(m)


def undo_dirs(made):
    for m in reversed(made):
        os.rmdir(m)


def run(op):
    kind, p, aux = op["op"], op["path"], op.get("aux")
    undo = []
    try:
        if kind == "create":
            made = []
            undo.append(lambda: undo_dirs(made))
            created_dirs(p, made)
            if os.path.islink(p):
                # A dangling link: open(O_CREAT) follows it and creates its target (O_EXCL would refuse the link).
                target = os.path.join(os.path.dirname(p), os.readlink(p))
                fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
                os.close(fd)
                undo.insert(0, lambda: os.unlink(target))
            else:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.close(fd)
                undo.insert(0, lambda: os.unlink(p))
        elif kind == "mkdir":
            made = []
            undo.append(lambda: undo_dirs(made))
            created_dirs(p, made)
            os.mkdir(p)
            undo.insert(0, lambda: os.rmdir(p))
        elif kind == "write":
            fd = os.open(p, os.O_WRONLY | os.O_APPEND)
            os.close(fd)
        elif kind == "truncate":
            os.truncate(p, os.stat(p).st_size)
        elif kind == "chmod":
            os.chmod(p, os.stat(p).st_mode & 0o7777)
        elif kind == "chown":
            st = os.stat(p)
            os.chown(p, st.st_uid, st.st_gid)
        elif kind == "utime":
            st = os.stat(p)
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        elif kind == "symlink":
            made = []
            undo.append(lambda: undo_dirs(made))
            created_dirs(p, made)
            os.symlink("diff-target", p)
            undo.insert(0, lambda: os.unlink(p))
        elif kind in ("rename", "move"):
            os.rename(p, aux)
            undo.append(lambda: os.rename(aux, p))
        elif kind == "link":
            os.link(p, aux, follow_symlinks=False)
            undo.append(lambda: os.unlink(aux))
        elif kind == "linkin":
            # linkat(AT_SYMLINK_FOLLOW): CPython calls link(2), which links a symlink itself, unless a dir fd is given.
            root = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.link(p, aux, src_dir_fd=root, follow_symlinks=True)
            finally:
                os.close(root)
            undo.append(lambda: os.unlink(aux))
        elif kind == "renamein":
            fd = os.open(aux, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
            made = []
            try:
                created_dirs(p, made)
                os.rename(aux, p)
            except OSError:
                os.unlink(aux)
                undo_dirs(made)
                raise
            undo.append(lambda: undo_dirs(made))
            undo.insert(0, lambda: os.unlink(p))
        else:
            return {"id": op["id"], "ok": False, "errno": "UNKNOWN-OP"}
        out = {"id": op["id"], "ok": True}
    except OSError as e:
        out = {"id": op["id"], "ok": False, "errno": name(e)}
    for u in undo:
        try:
            u()
        except OSError as e:
            out["dirty"] = name(e)
    return out


for op in json.load(sys.stdin):
    sys.stdout.write(json.dumps(run(op)) + "\n")
sys.stdout.flush()
