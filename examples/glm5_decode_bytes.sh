#!/usr/bin/env bash
# Seed 000's decode arithmetic, computed by the simulator: at one request, each GLM-5.3 MoE layer
# reads 9 of its 257 experts (8 routed + 1 shared); over the 75 MoE layers that is about 25.5 GB in
# FP8, which the node's 8 GPUs read in about 0.5 ms at the measured 6.07 TB/s (MI355X copy ceiling,
# seed Table 1), and MXFP4 halves it.
#
# Every number below comes from `tilelab`: the model shape from the glm-5 preset, the weight bytes
# (with their scales) from `sim moe` at one token for both stages, the shared expert as a dense FFN
# of its width that the one token always uses, the bandwidth from the mi355x preset.
#
# usage: examples/glm5_decode_bytes.sh [path/to/tilelab] [gpus]
set -euo pipefail
tl=${1:-build/tilelab}
gpus=${2:-8}

field() { # field CSV COLUMN ROW(1-based data row): one cell of a CSV by column name
  awk -F, -v c="$2" -v r="$3" 'NR==1{for(i=1;i<=NF;i++) if($i==c) k=i} NR==r+1{print $k}' <<<"$1"
}
models=$("$tl" models glm-5 --format csv)
hidden=$(field "$models" hidden 1)
width=$(field "$models" expert_width 1)
shared=$(field "$models" shared 1)
layers=$(field "$models" moe_layers 1)
topk=$(field "$models" top_k 1)
hw=$("$tl" hw show mi355x --format csv)
copy_gbps=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="measured") k=i} $1=="hbm_copy_gbps"{print $k}' <<<"$hw")

bytes_per_layer() { # bytes_per_layer DTYPE SHARED: expert weight bytes one token reads, both stages
  local csv
  # the generic kernel: it counts the shared expert's weights too (tilelab's own kernel fuses none)
  csv=$("$tl" sim moe --hw mi355x --model glm-5 --dtype "$1" --shared "$2" --tokens 1 --stage both --kernel generic \
        --format csv 2>/dev/null)
  awk -v a="$(field "$csv" weight_bytes 1)" -v b="$(field "$csv" weight_bytes 2)" 'BEGIN{printf "%.0f", a + b}' 
}

printf 'GLM-5.3 (glm-5 preset): hidden %d, expert width %d, top-%d + %d shared, %d MoE layers\n' \
  "$hidden" "$width" "$topk" "$shared" "$layers"
printf 'node: %d GPUs at %s GB/s each (mi355x measured copy ceiling)\n\n' "$gpus" "$copy_gbps"
printf '%-6s %14s %14s %12s %10s\n' dtype routed_B/layer shared_B/layer total_GB ms_on_node
for dt in fp8 mxfp4; do
  routed=$(bytes_per_layer "$dt" 0)
  all=$(bytes_per_layer "$dt" "$shared")
  awk -v dt="$dt" -v r="$routed" -v a="$all" -v l="$layers" -v g="$gpus" -v bw="$copy_gbps" \
    'BEGIN{t = a * l; printf "%-6s %14.0f %14.0f %12.2f %10.3f\n", dt, r, a - r, t / 1e9, t / g / (bw * 1e9) * 1e3}' 
done
