#!/usr/bin/env bash
# The include layering of DESIGN.md, read from the #include "..." lines of every .c, .h and .hip
# of the layered folders (usage: cli_layers.sh TILELAB SRC; TILELAB is not used). Bottom up:
#   core, numerics           may include each other
#   contract                 + contract
#   simulator, reference, kernels (side by side)   + their own folder only, none another
#   executor                 + simulator (the MFMA layouts); kernels include its platform header
#   visualize                + simulator (the results it draws) and visualize
#   ops                      anything below it
#   cli                      anything
# A quoted include resolves against the including file's folder, then against SRC. Fails naming
# the file and line of each include that breaks a rule, and each include loop (its files in
# order). Angle-bracket includes and files outside these folders (tests, bench, examples) are not
# read. Cost: one pass of awk over the sources, well under a second.
set -uo pipefail
src=${2:?usage: cli_layers.sh TILELAB SRC}
cd "$src" || exit 2
folders="core numerics contract simulator reference kernels executor visualize ops cli"
files=$(for d in $folders; do [ -d "$d" ] && find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.hip' \); done | sort)
[ -n "$files" ] || { echo "FAIL: no sources under $src"; exit 1; }

# ---- every include as "FILE LINE TARGET" (TARGET relative to SRC, normalized) ------------------
edges=$(for f in $files; do
  awk -v f="$f" '
    function norm(p,   n, parts, out, i, k) {
      n = split(p, parts, "/"); k = 0
      for (i = 1; i <= n; i++) {
        if (parts[i] == "" || parts[i] == ".") continue
        if (parts[i] == "..") { if (k > 0) k--; continue }
        out[++k] = parts[i]
      }
      p = ""; for (i = 1; i <= k; i++) p = p (i > 1 ? "/" : "") out[i]
      return p
    }
    /^[ \t]*#[ \t]*include[ \t]*"/ {
      t = $0; sub(/^[^"]*"/, "", t); sub(/".*$/, "", t)
      dir = f; sub(/[^\/]*$/, "", dir)
      rel = norm(dir t)
      if ((getline junk < rel) >= 0) { close(rel); print f, FNR, rel }
      else if ((getline junk < t) >= 0) { close(t); print f, FNR, norm(t) }
    }' "$f"
done)

# ---- the rules and the loops --------------------------------------------------------------------
awk '
  BEGIN {
    allow["core"] = "core numerics"
    allow["numerics"] = "core numerics"
    allow["contract"] = "core numerics contract"
    allow["simulator"] = "core numerics contract simulator"
    allow["reference"] = "core numerics contract reference"
    allow["kernels"] = "core numerics contract kernels executor"
    allow["executor"] = "core numerics contract simulator executor"
    allow["visualize"] = "core numerics contract simulator visualize"
    allow["ops"] = "core numerics contract simulator reference kernels visualize ops"
    allow["cli"] = "core numerics contract simulator reference kernels executor visualize ops cli"
    bad = 0
  }
  function top(p) { sub(/\/.*$/, "", p); return p }
  function allowed(from, to,   list, n, i) {
    if (!(from in allow)) return 1
    n = split(allow[from], list, " ")
    for (i = 1; i <= n; i++) if (list[i] == to) return 1
    return 0
  }
  {
    from = top($1); to = top($3)
    if (!allowed(from, to)) {
      printf "FAIL: %s:%s: includes %s (%s may include only %s)\n", $1, $2, $3, from, allow[from]
      bad++
    }
    adj[$1] = adj[$1] " " $3; node[$1] = 1; node[$3] = 1
  }
  # depth-first search; a grey node met again closes a loop
  function visit(v,   n, list, i, w, j, path) {
    colour[v] = 1; stack[++depth] = v
    n = split(adj[v], list, " ")
    for (i = 1; i <= n; i++) {
      w = list[i]
      if (colour[w] == 1) {
        path = ""
        for (j = 1; j <= depth; j++) if (stack[j] == w || path != "") path = path stack[j] " -> "
        printf "FAIL: include loop: %s%s\n", path, w
        bad++
      } else if (colour[w] == 0) visit(w)
    }
    depth--; colour[v] = 2
  }
  END {
    depth = 0
    for (v in node) if (colour[v] == 0) visit(v)
    printf "%d includes read, %d broken\n", NR, bad
    exit bad > 0
  }' <<<"$edges"
