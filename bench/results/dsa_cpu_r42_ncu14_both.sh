#!/usr/bin/env bash
# round 42: source-counter profiles of S1 / C1 at H = 32 on main (.dev/ncu14) and on the selection-alone arm (.dev/ncu14s)
bash .dev/ncu14/call42.sh > $OUT/ncu14_main.log 2>&1; echo "main rc=$?"
bash .dev/ncu14s/call42.sh > $OUT/ncu14_sa.log 2>&1; echo "sa rc=$?"
for f in $OUT/ncu14_main.log $OUT/ncu14_sa.log; do echo "######## $f"; grep -v "^\[" $f | head -80; done
