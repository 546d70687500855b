#!/usr/bin/env bash
# Machine-readable output is only that: every command that takes --format prints, with csv, one
# CSV table (a header of distinct names, the same number of columns on every row) and, with json,
# one JSON document (no NaN or Infinity tokens) on standard output; notes, titles and verdicts go
# to standard error. Parsed with python3's csv and json modules.
# The commands come from the list below; the list is checked against the commands' own help
# (`tilelab --help`, each group's subcommands, `check --help`'s ops): a command whose usage offers
# --format and is not listed fails the test. A command that needs a GPU this machine lacks (exit 1,
# an error naming the GPU) is skipped and said so.
# usage: cli_formats.sh TILELAB SRC
set -u
tl=$1
src=$2
. "$(dirname "$0")/lib.sh"
LAST_OUT=
# Commands known to print text beside their CSV/JSON whose fix is under way elsewhere, as
# space-separated leaves ("check moe"); each is reported (KNOWN) instead of failing, and fails once
# it parses, so that the entry goes with the fix. None today.
known_bad=""

cat >"$tmp/parse.py" <<'PY'
import csv, json, sys
fmt, path = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8").read()
def no_constant(name):
    raise ValueError("%s is not JSON" % name)
if fmt == "json":
    doc = json.loads(text, parse_constant=no_constant)
    if doc in ([], {}, None):
        sys.exit("an empty JSON document")
else:
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        sys.exit("no CSV at all")
    header = rows[0]
    if len(set(header)) != len(header) or not all(header):
        sys.exit("header %r: empty or repeated names" % header)
    for i, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            sys.exit("line %d has %d fields, the header %d: %r" % (i, len(row), len(header), row[:4]))
PY

covered="$tmp/covered"
: >"$covered"
skipped=0
# formats LEAF -- ARGS...: runs `tilelab ARGS --format F` for csv and json; LEAF is the command as
# its help names it ("hw show"), recorded as covered.
formats() {
  local leaf=$1 f rc
  shift 2
  echo "$leaf" >>"$covered"
  for f in csv json; do
    "$tl" "$@" --format "$f" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 1 ] && grep -q '^tilelab: error: .*GPU' "$tmp/err"; then
      echo "skip: $* --format $f: $(cat "$tmp/err")"
      skipped=$((skipped + 1))
      continue
    fi
    if [ "$rc" -ne 0 ]; then
      echo "FAIL: tilelab $* --format $f: exit $rc"
      head -3 "$tmp/err"
      fail=$((fail + 1))
    elif ! why=$(python3 "$tmp/parse.py" "$f" "$tmp/out" 2>&1); then
      if [ "$known_bad" != "${known_bad/$leaf/}" ]; then
        echo "KNOWN: tilelab $* --format $f: not only $f yet: $(tail -1 <<<"$why")"
        pass=$((pass + 1))
      else
        echo "FAIL: tilelab $* --format $f: standard output is not only $f: $(tail -1 <<<"$why"); it ends:"
        tail -3 "$tmp/out"
        fail=$((fail + 1))
      fi
    elif [ "$known_bad" != "${known_bad/$leaf/}" ]; then
      echo "FAIL: tilelab $* --format $f parses now: take '$leaf' off known_bad in $0"
      fail=$((fail + 1))
    else
      pass=$((pass + 1))
    fi
  done
}

printf '{"device": "test H200", "date": "2026-11-29", "ceilings": {"hbm_read_gbps": {"measured": 4500}}}\n' >"$tmp/ov.json"
roofline=$src/bench/results/2026-11-29_h200_roofline.json

formats "numerics table" -- numerics table e4m3fn
formats "numerics table" -- numerics table e2m1
formats "numerics quantize" -- numerics quantize --scheme all --n 4096 --seed 1
formats "numerics quantize" -- numerics quantize --scheme fp8_e4m3_tensor --dist outliers --n 4096 --seed 1 --rotate hadamard
formats "numerics attention-error" -- numerics attention-error --shape 4x2x32 --seq 130 --rotate hadamard --seed 1
formats "bench numerics" -- bench numerics --n 1024 --runs 1
formats "hw list" -- hw list
formats "hw show" -- hw show mi355x
formats "hw show" -- hw show mi300x --instructions
formats "hw show" -- hw show "h200,$tmp/ov.json"
formats "models" -- models
formats "models" -- models deepseek-v3.2 "$src/presets/models/qwen3-8b.json"
formats "ops" -- ops
formats "mfma list" -- mfma list --arch gfx942
formats "mfma list" -- mfma list --arch gfx950
formats "mfma layout" -- mfma layout --arch gfx950 --instr v_mfma_scale_f32_16x16x128_f8f6f4 --matrix A
formats "mfma layout" -- mfma layout --arch gfx942 --instr v_mfma_f32_16x16x16_bf16 --matrix C
formats "bench roofline" -- bench roofline --from "$roofline"
formats "bench roofline" -- bench roofline --from "$roofline" --hw mi355x
formats "bench roofline" -- bench roofline --quick --iters 2 --warmup 0 --hbm-gib 0.0625
formats "sim moe" -- sim moe --hw mi355x --model deepseek-v3.2 --dtype fp8 --tokens 1,64 --stage both
formats "sim moe" -- sim moe --hw h200 --model glm-5 --dtype mxfp4 --tokens 1 --tp 8
formats "sim moe" -- sim moe --hw mi300x --model qwen3-8b --dtype bf16 --tokens 16
formats "sim paged-decode" -- sim paged-decode --hw mi355x --kv-dtype bf16 --gqa 1 --batch 32 --seq 16384 --kv-heads 16
formats "sim amd-code" -- sim amd-code --hw mi355x --kernel indexer_kernel
formats "bench sim" -- bench sim
formats "check moe" -- check moe --model deepseek-v2-lite --tokens 1 --seed 1
formats "check moe" -- check moe --hidden 256 --width 192 --experts 8 --topk 2 --dtype fp8 --tokens 1 --seed 1
formats "bench moe" -- bench moe --model deepseek-v2-lite --tokens 1 --seed 1
formats "sim topk" -- sim topk --hw h200 --n 4096,1048576 --batch 1,32 --k 512
formats "check topk" -- check topk --n 1000 --batch 3 --k 10,2000 --dist ties --seed 1
formats "bench topk" -- bench topk --n 4096 --batch 1 --k 512
formats "sim indexer" -- sim indexer --hw mi355x --heads 32 --rows 2048 --kv 32768
formats "check indexer" -- check indexer --rows 37 --kv 300 --heads 32 --seed 1
formats "check indexer" -- check indexer --rows 100 --kv 300 --heads 32 --sample-rows 10 --seed 1
formats "check indexer" -- check indexer --rows 37 --kv 300 --heads 32 --windows ragged --seed 1
formats "bench indexer" -- bench indexer --rows 64 --kv 256 --heads 32
formats "sim decode" -- sim decode --hw mi355x --batch 1,32 --seq 16384 --kv-heads 16 --gqa 1
formats "sim decode dual-scope" -- sim decode --kind dual-scope --hw h200 --batch 1,8 --seq 65536 --mtp 2
formats "check decode" -- check decode --batch 3 --seq 70 --gqa 4 --kv-heads 2 --mixed --seed 1
formats "check decode dual-scope" -- check decode --kind dual-scope --batch 2 --seq 300 --heads 16 --topk 64 --seed 1
formats "bench decode" -- bench decode --batch 2 --seq 256 --gqa 4 --kv-heads 2
formats "sim quant" -- sim quant --hw h200 --rows 1,4096 --k 7168
formats "sim quant" -- sim quant --hw mi300x --scheme fp8-query --hadamard --rows 300 --k 4096
formats "check quant" -- check quant --scheme mxfp4 --rule up --rows 1,3 --k 256 --dist adversarial --seed 1
formats "check quant" -- check quant --scheme dispatch --rows 2 --k 1152 --seed 1
formats "bench quant" -- bench quant --rows 1 --k 7168
formats "sim dispatch" -- sim dispatch --model glm-5 --ep 8 --tokens 1,4096
formats "sim dispatch" -- sim dispatch --hw h200 --tokens 16
formats "sim prefill" -- sim prefill --hw mi355x --shape deepseek-v2-lite --seq 1000,16384 --dtype fp8
formats "sim step" -- sim step --model glm-5 --hw mi355x --tp 8 --batch 32
formats "sim step" -- sim step --model qwen3-30b-a3b --hw h100 --phase prefill --context 1024,2048 --batch 2 --rows calls
formats "sim step" -- sim step --model mixtral-8x7b --hw mi300x --tp 2 --rows layers
formats "check prefill" -- check prefill --shape 4x2x128 --seq 130 --dtype fp8 --rotate hadamard --seed 1
formats "bench prefill" -- bench prefill --shape 2x1x128 --seq 256

# every command whose help offers --format is in the list above
python3 - "$tl" "$covered" >"$tmp/missing" <<'PY'
import re, subprocess, sys
tl, covered = sys.argv[1], set(open(sys.argv[2]).read().split("\n")) - {""}
def helptext(*words):
    r = subprocess.run([tl, *words, "--help"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""
def listed(text):  # the "  name  summary" lines of a dispatch table
    return re.findall(r"^  ([a-z][a-z0-9-]*) ", text, re.M)
def leaves(*words):
    text = helptext(*words)
    if "SUBCOMMAND" in text.split("\n", 1)[0]:
        for sub in listed(text):
            yield from leaves(*words, sub)
    elif re.search(r"^ops:", text, re.M):
        for op in re.search(r"^ops:(.*)$", text, re.M).group(1).split():
            yield from leaves(*words, op)
    elif "--format" in text and words[0] != "draw":  # a draw writes a picture (its help may name a bench's --format)
        yield " ".join(words)
top = subprocess.run([tl, "--help"], capture_output=True, text=True).stdout
commands = listed(top.split("commands:", 1)[1])
found = [leaf for c in commands if c not in ("help", "version") for leaf in leaves(c)]
if not found:
    print("no command found in tilelab --help")
for leaf in found:
    if leaf not in covered:
        print(leaf)
PY
check "every command with --format is tested (missing: $(tr '\n' ' ' <"$tmp/missing"))" -- test ! -s "$tmp/missing"
[ "$skipped" -gt 0 ] && echo "$skipped runs skipped: no GPU"
finish
