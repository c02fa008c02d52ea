#!/bin/bash
# best vs last checkpoints of seed 2's 8 members, as an ensemble, on 3,000 validation tasks (no Lake trials)
cd /work/main
B=/work/t39/4h/omniglot_triplet_e2596b6
D=/tmp/omni_nolake/omniglot
S=/work/t39/4h/cpu4h-seed2
for which in ${WHICH:-last best}; do
  others=$(for k in 2 3 4 5 6 7 8; do printf '%s/member-%d/%s.safetensors,' $S $k $which; done); others=${others%,}
  date -u +"%F %T start eval $which" >> /work/t39/4h/chain.log
  /usr/bin/time -o /work/t39/4h/bl-$which.time -f '%e s wall %U user' $B --evaluate $S/member-1/$which.safetensors --ensemble $others \
    --test-dir $D/images_evaluation --test-tasks 3000 --test-seed 424242 --device cpu --data-dir $D --out-dir /work/t39/4h/bl-$which ${EXTRA} > /work/t39/4h/bl-$which.log 2>&1
  echo "exit $?" >> /work/t39/4h/bl-$which.time
  date -u +"%F %T end eval $which" >> /work/t39/4h/chain.log
done
