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
# Issue 37: every output format (PNG, SVG, PDF, .npy, --save's JSON, --points' CSV) past `ulimit
# -f`, on a full device and on a disk full but for the file's last partial page: exit 1, one line,
# the old file kept; standard output under `ulimit -f 0`; symbolic links planted at the temporary
# names a writer used to take ("<path>.tmp.<pid>") are not written through; aliased outputs and an
# output that is an input are refused before any work; the tour counts a refused output.
# Devices are made with mknod in $tmp (root), never the real /dev/null; the full disk is a tmpfs
# (skipped, with a note, where mount is not allowed). About 25 s of CPU (more with ASan), most of
# it the two tours' steps.
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

# ---- issue 37: every output format on a full disk, past `ulimit -f`, and on a full device: one
# error line, exit 1, the old file kept, no temporary file left ----
python3 -c '
import struct
h = "{\x27descr\x27: \x27<u2\x27, \x27fortran_order\x27: False, \x27shape\x27: (64, 128), }"
h += " " * ((64 - (11 + len(h)) % 64) % 64) + "\n"
open("q.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<8192H", *[0x3F80 + i % 97 for i in range(8192)]))'
# each writer once: DESCRIPTION OUTPUT-NAME WHAT-IN-THE-MESSAGE command... ({} = the output)
writers=(
  "a PNG picture|o.png|the picture|draw padding --hw mi355x -o {}"
  "an SVG picture|o.svg|the picture|draw padding --hw mi355x -o {}"
  "a PDF picture|o.pdf|the picture|draw padding --hw mi355x -o {}"
  "a PDF of another verb|t.pdf|the picture|draw timeline --hw mi355x --tokens 64 -o {}"
  "an .npy output|o.npy|the .npy file|run quant --input x=$tmp/q.npy --output codes={}"
  "--save's JSON|o.json|the overlay|bench roofline --from $R --save {}"
  "--points' CSV|o.csv|the points|bench roofline --from $R --points {}"
)
run_writer() { # OUT command-template...: the command with {} replaced by OUT
  local out=$1; shift; local w; local -a args=()
  for w in $*; do args+=("${w//\{\}/$out}"); done
  "$tl" "${args[@]}"
}
one_line() { [ "$(grep -c . <<<"$LAST_ERR")" -eq 1 ] && grep -q -- "$1" <<<"$LAST_ERR"; }
mkdir -p lim
for w in "${writers[@]}"; do
  IFS='|' read -r what name says cmd <<<"$w"
  printf 'old\n' >"lim/$name"
  expect 1 "ulimit -f: $what" -- bash -c "ulimit -f 4; $(declare -f run_writer); tl='$tl'; run_writer lim/$name $cmd"
  check "ulimit -f, $what: one line, 'File too large'" -- one_line "lim/$name: cannot write $says: File too large"
  check "ulimit -f, $what: the old file kept" -- grep -qx old "lim/$name"
  mknod "lim/full-$name" c 1 7
  expect 1 "a full device: $what" -- run_writer "lim/full-$name" $cmd
  check "a full device, $what: one line, 'No space left on device'" -- one_line "full-$name: cannot write $says: No space left on device"
done
check "ulimit -f and full devices: no temporary file left" -- bash -c '! compgen -G "lim/*.tmp.*" >/dev/null'
# The full disk takes all of the file but its last partial 4 KiB (tmpfs pages): the writes that
# fill stdio's buffers succeed and only the last flush, at close, fails (the case a PDF missed).
mkdir full37 sizes
if mount -t tmpfs -o size=64k tmpfs full37 2>/dev/null; then
  for w in "${writers[@]}"; do
    IFS='|' read -r what name says cmd <<<"$w"
    run_writer "sizes/$name" $cmd >/dev/null 2>&1
    size=$(stat -c %s "sizes/$name")
    mount -o remount,size=$((4096 + size / 4096 * 4096)) full37 # the old file's page, then the whole pages
    printf 'old\n' >"full37/$name"
    expect 1 "a full disk but for the last $((size % 4096)) bytes: $what" -- run_writer "full37/$name" $cmd
    check "a full disk, $what: one line, 'No space left on device'" -- one_line "full37/$name: cannot write $says: No space left on device"
    check "a full disk, $what: the old file kept" -- grep -qx old "full37/$name"
    check "a full disk, $what: no temporary file left" -- bash -c '! compgen -G "full37/*.tmp.*" >/dev/null'
    rm -f "full37/$name"
  done
  umount full37
else
  echo "note: mount -t tmpfs is not allowed here: the full-disk cases of issue 37 did not run"
fi
# ulimit -f 0 on standard output redirected to a file: a line and exit 1, not a silent SIGXFSZ
# (its standard error goes to the pipe of standard output: a file could not take the line either)
expect 1 "ulimit -f 0, standard output to a file" -- bash -c 'ulimit -f 0; exec "$0" hw list 2>&1 >lim/hw.txt' "$tl"
check "ulimit -f 0: one line, 'File too large'" -- bash -c '[ "$0" = "tilelab: error: standard output: cannot write: File too large" ]' "$LAST_OUT"

# ---- issue 37: a symbolic link planted at a temporary name is not written through ----
# The old names were "<path>.tmp.<pid>": links for the next 400 process ids point at a victim.
printf 'victim\n' >victim.txt
python3 -c '
import os, sys
last = os.getpid()  # the newest process id: the writers below come right after it
for name in ("s.png", "s.npy", "s.json"):
    for p in range(last, last + 401): os.symlink(sys.argv[1], "%s.tmp.%d" % (name, p))' "$tmp/victim.txt"
expect 0 "a picture beside planted links" -- "$tl" draw padding --hw mi355x -o s.png
expect 0 "an .npy beside planted links" -- "$tl" run quant --input x=q.npy --output codes=s.npy
expect 0 "--save beside planted links" -- "$tl" bench roofline --from "$R" --save s.json
check "the victim is untouched" -- grep -qx victim victim.txt
check "the outputs are written in place" -- bash -c 'head -c 4 s.png | grep -q PNG && head -c 6 s.npy | grep -q NUMPY && grep -q ceilings s.json'
check "the planted links are left alone" -- bash -c '[ "$(find . -maxdepth 1 -name "s.*.tmp.*" -type l | wc -l)" -eq 1203 ]'
rm -f s.png.tmp.* s.npy.tmp.* s.json.tmp.*

# ---- issue 37: aliased outputs, and an output that is an input, are refused before any work ----
cp "$R" r.json
expect 2 "--points onto the --from file" -- "$tl" bench roofline --from r.json --points r.json
check "says so; the result is kept" -- bash -c 'grep -q "is the --from file" <<<"$0" && cmp -s r.json "$1"' "$LAST_ERR" "$R"
expect 2 "--save onto the --from file" -- "$tl" bench roofline --from r.json --save ./r.json
ln -s r.json r-link.json
expect 2 "--points onto a link to the --from file" -- "$tl" bench roofline --from r.json --points r-link.json
expect 2 "--save and --points through a folder link" -- bash -c 'ln -s . here && exec "$0" bench roofline --from "$1" --save a.json --points here/a.json' "$tl" "$R"
expect 2 "run topk: two outputs onto one file" -- "$tl" run topk --input scores=topk_in.npy --output idx=A.npy --output count=A.npy
check "names the two outputs" -- grep -q "one file" <<<"$LAST_ERR"
expect 2 "run: an output onto its input" -- "$tl" run quant --input x=q.npy --output codes=q.npy
check "the input is kept" -- bash -c 'head -c 6 q.npy | grep -q NUMPY && [ "$(stat -c %s q.npy)" -eq 16512 ]'
expect 2 "run: an output name given twice" -- "$tl" run quant --input x=q.npy --output codes=c1.npy --output codes=c2.npy
printf 'kernel,flops,hbm_bytes,time_us\nmma,1e12,0,100\n' >pts.png
expect 2 "draw roofline -o onto its --points file" -- "$tl" draw roofline --points pts.png -o pts.png
check "the points are kept" -- grep -q mma pts.png
check "nothing was written for the refused aliases" -- bash -c '[ ! -e A.npy ] && [ ! -e c1.npy ] && [ ! -e c2.npy ] && [ ! -e a.json ]'

# ---- issue 37: the tour counts and prints a refused output (a read-only moe-sim.csv) ----
mkdir tro && printf 'junk\n' >tro/moe-sim.csv && chmod 444 tro/moe-sim.csv
expect 1 "the tour with a read-only moe-sim.csv" -- "$tl" tour --out tro
check "the refusal is printed at its step" -- grep -q "tro/moe-sim.csv: is read-only" <<<"$LAST_ERR"
check "the step that reads it is skipped, not run on the old file" -- bash -c 'grep -q "skipped: it reads tro/moe-sim.csv" <<<"$0" && [ ! -e tro/roofline.png ]' "$LAST_OUT"
check "27 steps, 2 failed" -- bash -c 'grep -q "27 steps, 2 failed" <<<"$0" && grep -q "2 of 27 steps failed" <<<"$1"' "$LAST_OUT" "$LAST_ERR"
check "the read-only file is unchanged" -- grep -qx junk tro/moe-sim.csv
check "no temporary file is left" -- no_tmp
finish
