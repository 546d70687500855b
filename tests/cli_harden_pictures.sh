#!/usr/bin/env bash
# Hardening of the pictures and the files they draw from (issue 23): a run that wrote its picture
# exits 0 every time, malformed traces and points files are refused with what is wrong, PDFs are
# byte-reproducible, and a huge trace draws a bounded picture.
# Usage: cli_harden_pictures.sh TILELAB SRC
set -o pipefail
tl=$1
. "$2/tests/lib.sh"
# GLib 2.74 slab-allocates its objects, which hides their leaks from LeakSanitizer in the
# sanitizer build; plain malloc lets it see them (no effect on the release build).
export G_SLICE=always-malloc
asan_lib=$(ldd "$tl" 2>/dev/null | awk '/libasan/ {print $3}')

# ---- exit after the picture is written ----
# Pango sorts the fonts of each new font description in a thread of its own, which may still run
# when the program exits; tearing fontconfig down at exit then aborted (exit 134). First made
# certain: a preloaded FcFontSetSort that holds its result 0.3 s longer (a busy machine), so that
# a sort is still running at every exit. Then as it happens: 200 plain runs, 8 at a time.
cat >"$tmp/slow_sort.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
typedef void *(*sort_fn)(void *, void **, int, void *, int, void **, int *);
void *FcFontSetSort(void *config, void **sets, int nsets, void *pattern, int trim, void **csp, int *result)
{
    sort_fn real = (sort_fn)dlsym(RTLD_NEXT, "FcFontSetSort");
    void *fonts = real(config, sets, nsets, pattern, trim, csp, result);
    nanosleep(&(struct timespec){0, 300 * 1000 * 1000}, NULL);
    return fonts;
}
EOF
if cc -shared -fPIC -o "$tmp/slow_sort.so" "$tmp/slow_sort.c" -ldl 2>"$tmp/cc.err"; then
  # the sanitizer runtime must come first in the preload list
  preload="${asan_lib:+$asan_lib }$tmp/slow_sort.so"
  for ext in svg pdf svg pdf; do
    expect 0 "draw roofline -o r.$ext while a font sort still runs at exit" -- \
      env LD_PRELOAD="$preload" "$tl" draw roofline -o "$tmp/slow.$ext"
    check "nothing on stderr (r.$ext)" -- test -z "$LAST_ERR"
  done
else
  echo "SKIPPED: the slow font sort case (no C compiler: $(head -1 "$tmp/cc.err"))"
fi

# A sanitized run costs about ten times a release run: 40 of them there.
runs=200; [ -n "$asan_lib" ] && runs=40
roofline_runs() { # WORKER N: N runs, half SVG, half PNG; a line in race.bad per bad run
  local k=$1 n=$2 i ext rc
  for ((i = 0; i < n; i++)); do
    ext=svg; ((i % 2)) && ext=png
    "$tl" draw roofline -o "$tmp/race$k.$ext" 2>"$tmp/race$k.err"; rc=$?
    if [ "$rc" -ne 0 ] || [ -s "$tmp/race$k.err" ]; then
      echo "exit $rc: $(head -1 "$tmp/race$k.err")" >>"$tmp/race.bad"
    fi
  done
}
: >"$tmp/race.bad"
for k in 1 2 3 4 5 6 7 8; do roofline_runs "$k" $((runs / 8)) & done
wait
check "$runs draw roofline runs all exit 0 with nothing on stderr" -- test ! -s "$tmp/race.bad"
[ -s "$tmp/race.bad" ] && sort "$tmp/race.bad" | uniq -c

# ---- traces and points files that are not what they seem ----
has() { grep -q -- "$1" <<<"$LAST_ERR"; }
lacks() { ! grep -q -- "$1" <<<"$LAST_ERR"; }
no_picture() { [ ! -e "$1" ] && [ -z "$(ls "$1".tmp.* 2>/dev/null)" ]; }
hdr='tokens,stage,dtype,block,tile,nblock,sm,start_us,end_us,source'
printf '"x\n' >"$tmp/quote1.csv"
expect 2 "a trace of one unterminated quote" -- "$tl" draw timeline --trace "$tmp/quote1.csv" -o "$tmp/q1.png"
check "says the quote is unterminated, on line 1" -- has "line 1: unterminated quote"
check "does not call a 3-byte file empty" -- lacks "empty"
check "no picture from it" -- no_picture "$tmp/q1.png"
printf '%s\n1,2,"bf16\n' "$hdr" >"$tmp/quote2.csv"
expect 2 "a trace whose second row opens a quote" -- "$tl" draw timeline --trace "$tmp/quote2.csv" -o "$tmp/q2.png"
check "names the line where the row starts (2)" -- has "line 2: unterminated quote"
printf '%s\n' "$hdr" >"$tmp/header_only.csv"
expect 2 "a trace of its header only" -- "$tl" draw timeline --trace "$tmp/header_only.csv" -o "$tmp/h.png"
check "says it has no data rows" -- has "no data rows"
: >"$tmp/zero.csv"
expect 2 "a trace of 0 bytes" -- "$tl" draw timeline --trace "$tmp/zero.csv" -o "$tmp/z.png"
check "is called empty" -- has "empty trace file"
printf 'name,flops,hbm_bytes,time_us\n"k,1,2,3\n' >"$tmp/points_quote.csv"
expect 2 "a points file with an unterminated quote" -- "$tl" draw roofline --points "$tmp/points_quote.csv" -o "$tmp/pq.png"
check "says so with its line" -- has "line 2: unterminated quote"

# ---- a huge trace draws a bounded picture ----
# 200000 blocks of 0.09 us on 132 SMs (sub-point bars: one merged bar per SM); 60000 blocks of 6 us
# on 600 SMs (60000 bars a reader could tell apart: refused, saying how many).
awk -v h="$hdr" 'BEGIN { print h; for (i = 0; i < 200000; i++) { t = int(i / 132) * 0.1;
  printf "1,2,bf16,%d,%d,0,%d,%.3f,%.3f,x\n", i, i, i % 132, t, t + 0.09 } }' >"$tmp/many.csv"
expect 0 "a trace of 200000 short blocks" -- "$tl" draw timeline --trace "$tmp/many.csv" --stage 2 -o "$tmp/many.svg"
check "draws an SVG under 1 MB (45 MB when every block was a bar)" -- \
  test "$(stat -c %s "$tmp/many.svg" 2>/dev/null || echo 0)" -lt 1000000
check "an SVG" -- grep -q "<svg" "$tmp/many.svg"
awk -v h="$hdr" 'BEGIN { print h; for (i = 0; i < 60000; i++) { t = (i % 100) * 8;
  printf "1,2,bf16,%d,%d,0,%d,%d,%d,x\n", i, i, int(i / 100), t, t + 6 } }' >"$tmp/wide.csv"
expect 2 "a trace of 60000 blocks a reader could tell apart" -- "$tl" draw timeline --trace "$tmp/wide.csv" --stage 2 -o "$tmp/wide.svg"
check "says how many bars and the bound" -- has "make 60000 bars.*at most 50000"
check "no picture from it" -- no_picture "$tmp/wide.svg"

# ---- numbers with commas ----
printf 'name,flops,hbm_bytes,time_us\nk,"1,5e12","2,000,000",10\n' >"$tmp/comma.csv"
expect 2 'a points value "1,5e12"' -- "$tl" draw roofline --points "$tmp/comma.csv" -o "$tmp/comma.png"
check "refused with its line and column" -- has "line 2: malformed number '1,5e12' in column flops"
check "no picture from it" -- no_picture "$tmp/comma.png"
printf 'name,flops,hbm_bytes,time_us\nk,"1,500,000,000,000","2,000,000",10\n' >"$tmp/grouped.csv"
expect 0 "thousands separators read as such" -- "$tl" draw roofline --points "$tmp/grouped.csv" -o "$tmp/grouped.svg"
expect 0 "the ncu export of the tests (values like \"1,073,751,040\")" -- \
  "$tl" draw roofline --hw h200 --points "$2/tests/data/ncu_h200_probe.csv" -o "$tmp/ncu.svg"

# ---- the same picture, the same bytes ----
# A second apart (the PDF's date had seconds in it): every format identical.
for ext in pdf svg png; do
  expect 0 "roofline .$ext, first run" -- "$tl" draw roofline -o "$tmp/same1.$ext"
done
sleep 1.1
for ext in pdf svg png; do
  expect 0 "roofline .$ext, a second later" -- "$tl" draw roofline -o "$tmp/same2.$ext"
  check "two roofline .$ext runs are byte-identical" -- cmp -s "$tmp/same1.$ext" "$tmp/same2.$ext"
done
trace="$2/tests/data/trace_h200_moe_small.csv"
expect 0 "timeline .pdf, first run" -- "$tl" draw timeline --trace "$trace" --stage 2 -o "$tmp/tl1.pdf"
sleep 1.1
expect 0 "timeline .pdf, a second later" -- "$tl" draw timeline --trace "$trace" --stage 2 -o "$tmp/tl2.pdf"
check "two timeline .pdf runs are byte-identical" -- cmp -s "$tmp/tl1.pdf" "$tmp/tl2.pdf"
pdf_date() { grep -a -o '/CreationDate ([^)]*)' "$1"; }
expect 0 "roofline .pdf with SOURCE_DATE_EPOCH=1764547200" -- \
  env SOURCE_DATE_EPOCH=1764547200 "$tl" draw roofline -o "$tmp/dated.pdf"
check "its creation date is 2025-12-01 00:00:00 UTC" -- grep -q '20251201000000Z' <(pdf_date "$tmp/dated.pdf")
check "without it the date is 1970-01-01" -- grep -q '19700101000000Z' <(pdf_date "$tmp/same1.pdf")
expect 2 "SOURCE_DATE_EPOCH=soon" -- env SOURCE_DATE_EPOCH=soon "$tl" draw roofline -o "$tmp/soon.pdf"
check "names the variable" -- has "SOURCE_DATE_EPOCH"
check "no PDF from it" -- no_picture "$tmp/soon.pdf"

finish
