#!/usr/bin/env bash
# Makes /tmp/landtb: this tree (without .dev) with landtb.diff applied and landtb's record cubins in .dev/record.
R=$(cd "$(dirname "$0")/../.." && pwd); L=/tmp/landtb
if [ ! -f $L/.ready ]; then
    rm -rf $L; mkdir -p $L
    (cd $R && tar --exclude=./.dev -cf - .) | tar -xf - -C $L
    (cd $L && patch -p1 -s < $R/.dev/pack/landtb.diff && tar -xJf $R/.dev/pack/landrec.txz) || exit 1
    [ -d $R/.peers ] && ln -sfn $R/.peers $L/.peers
    touch $L/.ready
fi
