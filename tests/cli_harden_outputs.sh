#!/usr/bin/env bash
# What an output replaces, and what survives a signal or a full disk (issue 23, items 1, 5 and the
# full-disk messages of 8). Every writer goes through tl_atomic_begin/commit (core/tl.h):
#   - a character device is written straight through and stays a device; a named pipe, a folder,
#     a read-only file and a symbolic link to nothing are refused with one line, exit 2, nothing
#     written; a symbolic link is followed (the target's contents replaced, the link kept); a
#     replaced file keeps its mode;
#   - every signal that ends the process removes the temporary file first; `ulimit -f` makes the
#     write fail with "File too large" (one line, exit 1) instead of killing it;
#   - a full disk says "No space left on device", and the tour stops at the first output it
#     cannot write, with that one line.
# Devices are made with mknod in $tmp (root), never the real /dev/null; the full disk is a 64 KiB
# tmpfs (skipped, with a note, where mount is not allowed). About 8 s (40 s with ASan), most of it
# the tour's steps before its first picture.
#   bash tests/cli_harden_outputs.sh <tilelab> <source-dir>
set -u
tl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$2" && pwd)
. "$src/tests/lib.sh"
trap 'umount "$tmp/full" 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
R=$src/bench/results/2026-11-29_h200_roofline.json
no_tmp() { ! compgen -G "$tmp/*.tmp.*" >/dev/null && ! compgen -G "$tmp/*/*.tmp.*" >/dev/null; }
is_chr() { test -c "$1" && [ "$(stat -c %t,%T "$1")" = "$2" ]; }
msg() { grep -q -- "$1" <<<"$LAST_ERR"; }

# ---- item 1: character devices are written through, and stay devices ----
mknod null.png c 1 3 && mknod null.json c 1 3 && mknod null.csv c 1 3 && mknod null.npy c 1 3 &&
  mknod full.png c 1 7 && mknod full.csv c 1 7 || { echo "FAIL: mknod (needs root)"; exit 1; }
expect 0 "a picture onto a null device" -- "$tl" draw padding --hw mi355x -o null.png
check "the null device is still a device" -- is_chr null.png 1,3
expect 0 "--save and --points onto null devices" -- "$tl" bench roofline --from "$R" --save null.json --points null.csv
check "--save's device is still a device" -- is_chr null.json 1,3
check "--points' device is still a device" -- is_chr null.csv 1,3
python3 -c '
import struct, sys
def npy(path, shape, fmt, vals):
    h = "{\x27descr\x27: \x27<%s4\x27, \x27fortran_order\x27: False, \x27shape\x27: %r, }" % (fmt, shape)
    h += " " * ((64 - (11 + len(h)) % 64) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<%d%s" % (len(vals), "f" if fmt == "f" else "i"), *vals))
npy("x.npy", (2, 256), "f", [(i % 7 - 3) / 4 for i in range(512)])
npy("ids.npy", (2, 2), "i", [0, 3, 1, 2])
npy("w.npy", (2, 2), "f", [0.5, 0.5, 0.75, 0.25])'
npy_run=(run moe --input x=x.npy --input topk_ids=ids.npy --input topk_weights=w.npy
  --hidden 256 --width 192 --experts 8 --topk 2 --seed 5)
expect 0 "an .npy output onto a null device" -- "$tl" "${npy_run[@]}" --output null.npy
check "the .npy's device is still a device" -- is_chr null.npy 1,3
expect 1 "a picture onto a full device" -- "$tl" draw padding --hw mi355x -o full.png
check "the full device says why" -- msg "full.png: cannot write the picture: No space left on device"
check "the full device is still a device" -- is_chr full.png 1,7

# ---- item 1: refused before anything is written ----
mkfifo pipe.png pipe.json && mkdir dir.png
expect 2 "a picture onto a named pipe" -- timeout 20 "$tl" draw padding --hw mi355x -o pipe.png
check "the pipe: says so" -- msg "pipe.png: is a named pipe"
check "the pipe is still a pipe" -- test -p pipe.png
expect 2 "--save onto a named pipe" -- timeout 20 "$tl" bench roofline --from "$R" --save pipe.json --points p.csv
check "--save refused: --points not written either" -- test ! -e p.csv
check "that pipe is still a pipe" -- test -p pipe.json
expect 2 "a picture onto a folder" -- "$tl" draw padding --hw mi355x -o dir.png
check "the folder: says so" -- msg "dir.png: is a folder"
printf 'keep\n' >ro.png && chmod 444 ro.png
expect 2 "a picture onto a read-only file" -- "$tl" draw padding --hw mi355x -o ro.png
check "read-only: says so" -- msg "ro.png: is read-only"
check "the read-only file is unchanged" -- grep -qx keep ro.png
printf 'keep\n' >ro.npy && chmod 444 ro.npy
expect 2 "an .npy output onto a read-only file" -- "$tl" "${npy_run[@]}" --output ro.npy
check "the read-only .npy is unchanged" -- grep -qx keep ro.npy
ln -s nowhere.png dangling.png
expect 2 "a picture onto a link to nothing" -- "$tl" draw padding --hw mi355x -o dangling.png
check "the dangling link: says so, creates nothing" -- bash -c '[ -L dangling.png ] && [ ! -e nowhere.png ]'

# ---- item 1: links followed, modes kept ----
mkdir real && printf 'old\n' >real/t.png && chmod 640 real/t.png && ln -s real/t.png link.png
expect 0 "a picture onto a symbolic link" -- "$tl" draw padding --hw mi355x -o link.png
check "the link is kept" -- test -L link.png
check "its target is the new picture" -- bash -c 'head -c 4 real/t.png | grep -q PNG'
check "the target keeps its mode 640" -- test "$(stat -c %a real/t.png)" = 640
printf 'old\n' >m.csv && chmod 600 m.csv
expect 0 "--points over a file of mode 600" -- "$tl" bench roofline --from "$R" --points m.csv
check "the new file keeps mode 600" -- test "$(stat -c %a m.csv)" = 600
check "no temporary file is left (item 1)" -- no_tmp

# ---- item 5: every signal that ends the process removes the temporary file ----
# The writer runs in the background with INT and QUIT at their default (a script's background
# jobs start with them ignored); the signal comes once its temporary file exists, and the exit
# status must say the signal ended it (a run that finished first would test nothing).
killed_clean() { # SIGNAME
  ulimit -c 0
  env --default-signal=INT,QUIT "$tl" draw timeline --tokens 20000 -o "sig.png" 2>/dev/null &
  local pid=$! i rc
  for i in $(seq 1000); do compgen -G "sig.png.tmp.*" >/dev/null && break; sleep 0.01; done
  kill -s "$1" "$pid"
  { wait "$pid"; } 2>/dev/null # not the shell's "Quit ..." line
  rc=$?
  [ "$rc" -eq $((128 + $(kill -l "$1"))) ] || { echo "  $1: exit $rc"; return 1; }
  ! compgen -G "sig.png*" >/dev/null || { echo "  $1: left $(ls sig.png*)"; rm -f sig.png*; return 1; }
}
for sig in QUIT ALRM USR1 USR2 PIPE XCPU PROF VTALRM RTMIN INT TERM HUP; do
  check "SIG$sig removes the temporary picture" -- killed_clean "$sig"
done
expect 1 "ulimit -f: the picture cannot grow" -- bash -c 'ulimit -f 20; exec "$0" draw padding --hw mi355x -o u.png' "$tl"
check "ulimit -f: one line, 'File too large'" -- bash -c '[ "$(grep -c . <<<"$0")" -eq 1 ] && grep -q "u.png: cannot write the picture: File too large" <<<"$0"' "$LAST_ERR"
check "ulimit -f: nothing left" -- bash -c '! compgen -G "u.png*" >/dev/null'

# ---- item 8: a full disk says so ----
expect 1 "standard output on a full device" -- bash -c '"$0" hw list >/dev/full' "$tl"
check "standard output: 'No space left on device'" -- msg "standard output: .*No space left on device"
expect 1 "the tour with its standard output full" -- bash -c '"$0" tour --out t0 >/dev/full' "$tl"
check "the tour stops at once: one line, no picture" -- bash -c '[ "$(grep -c . <<<"$0")" -eq 1 ] && ! compgen -G "t0/*" >/dev/null' "$LAST_ERR"
if mkdir full && mount -t tmpfs -o size=64k tmpfs full 2>/dev/null; then
  expect 1 "a picture on a full disk" -- "$tl" draw padding --hw mi355x -o full/p.svg
  check "the full disk: 'No space left on device'" -- msg "full/p.svg: cannot write the picture: No space left on device"
  check "the full disk: nothing left" -- bash -c '! compgen -G "full/*" >/dev/null'
  expect 1 "the tour on a full disk" -- "$tl" tour --out full/t
  check "the tour prints one error line" -- test "$(grep -c . <<<"$LAST_ERR")" -eq 1
  check "... the first picture's, and stops there" -- bash -c 'grep -q "moe-tiles.png: cannot write the picture: No space left on device" <<<"$0" && ! grep -q "Padding factor" <<<"$1"' "$LAST_ERR" "$LAST_OUT"
else
  echo "note: mount -t tmpfs is not allowed here: the full disk cases ran on /dev/full and a full device only"
fi
check "no temporary file is left" -- no_tmp
finish
