#!/usr/bin/env bash
# Builds tilelab with the CUDA GPU layer (nvcc, sm_90a: wgmma) and gathers it with the shared libraries it
# needs into one folder that runs on the lent H200 machine, which has no Cairo or Pango and no
# package registry:
#
#   scripts/device_bundle.sh [BUNDLE [BUILD]]      (defaults: .carry and build-cuda)
#   run(command=". .carry/env.sh && .carry/tilelab bench roofline --hw h200", carry=[".carry"])
#
# BUNDLE/tilelab   the stripped binary;
# BUNDLE/lib/      every library `ldd` lists except glibc's, copied under its soname;
# BUNDLE/opt/*.xz  the big ones the H200 image has itself (OpenBLAS, LAPACK(E), gfortran, jansson),
#                  compressed: BUNDLE/env.sh unpacks one into BUNDLE/lib only when the machine's
#                  own loader does not know its soname;
# BUNDLE/env.sh    sets LD_LIBRARY_PATH; source it from the repository root.
# bench/moe_h200.sh uses it too. The carry limit is 64 MiB for the whole working tree; the script
# fails above 56 MiB. Cost: a few minutes of nvcc on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-.carry}
build=${2:-build-cuda}
case "$bundle$build" in *[!A-Za-z0-9._-]*) echo "device_bundle: folder names must be plain names" >&2; exit 2 ;; esac
jobs=${JOBS:-2}

nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
[ -x "$nvcc" ] || { echo "device_bundle: nvcc not found at $nvcc" >&2; exit 1; }

echo "device_bundle: building $build (TILELAB_GPU=cuda, sm_90a)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTILELAB_GPU=cuda \
      -DCMAKE_CUDA_COMPILER="$nvcc" -DTILELAB_TESTS=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target tilelab >/dev/null

rm -rf "$bundle"
mkdir -p "$bundle/lib" "$bundle/opt"
cp "$build/tilelab" "$bundle/tilelab"
strip --strip-unneeded "$bundle/tilelab" 2>/dev/null || true
glibc='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|libmvec)\.so'
host_has='^(libopenblas|liblapack|liblapacke|libblas|libgfortran|libquadmath|libjansson)\.so'
while read -r soname path; do
  [ -n "$path" ] || continue
  if [[ $soname =~ $glibc ]]; then continue; fi
  if [[ $soname =~ $host_has ]]; then
    xz -9 -T"$jobs" -c <"$path" >"$bundle/opt/$soname.xz"
  else
    cp -L "$path" "$bundle/lib/$soname"
  fi
done < <(ldd "$bundle/tilelab" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')

cat >"$bundle/env.sh" <<'EOF'
# Sourced on the device machine (see scripts/device_bundle.sh): unpacks the libraries the machine
# lacks and puts this folder's lib/ first on LD_LIBRARY_PATH.
tl_bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for f in "$tl_bundle"/opt/*.xz; do
  [ -e "$f" ] || continue
  so=$(basename "$f" .xz)
  if ! ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$so "; then
    xz -dc "$f" >"$tl_bundle/lib/$so"
  fi
done
export LD_LIBRARY_PATH="$tl_bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
EOF

size_kib=$(du -sk "$bundle" | awk '{print $1}')
echo "device_bundle: $bundle/ takes $((size_kib / 1024)) MiB" \
     "($(ls "$bundle/lib" | wc -l) libraries copied, $(ls "$bundle/opt" | wc -l) compressed)"
if [ "$size_kib" -gt $((56 * 1024)) ]; then
  echo "device_bundle: over the 56 MiB budget (the carry limit is 64 MiB with the tree)" >&2
  exit 1
fi
echo "device_bundle: run with carry=[\"$bundle\"] and '. $bundle/env.sh && $bundle/tilelab ...'"
