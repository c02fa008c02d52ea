"""Ours / PyTorch throughput per round and the median, from tools/step_rounds.sh output:
  python3 tools/step_rounds_table.py OUTDIR
"""
import json, sys, glob, os, statistics
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, 'sampling-ours-*.json'))):
    i = f.rsplit('-', 1)[1].split('.')[0]
    ours = {b['name'].split('/')[1]: b['images_per_s'] for b in json.load(open(f))['benchmarks']}
    tf = os.path.join(d, f'sampling-torch-reused-{i}.jsonl')
    if not os.path.exists(tf): continue
    torch = [json.loads(l) for l in open(tf) if l.strip()]
    for k, t in enumerate(torch):
        o = ours.get(str(k))
        if o is None: continue
        rows.setdefault(k, []).append((o, t['images_per_s'], o / t['images_per_s']))
names = {0: 'offline pair', 1: 'online pair', 2: 'online triplet'}
for k, v in rows.items():
    print(f"{names[k]:15s} " + "  ".join(f"{o:.0f}/{t:.0f}={r:.2f}" for o, t, r in v) + f"  median ratio {statistics.median([r for *_, r in v]):.2f}")
c = []
for f in sorted(glob.glob(os.path.join(d, 'conv4-ours-*.json'))):
    i = f.rsplit('-', 1)[1].split('.')[0]
    tf = os.path.join(d, f'conv4-torch-reused-{i}.json')
    if not os.path.exists(tf): continue
    o = json.load(open(f))['benchmarks'][0]['images_per_s']; t = json.load(open(tf))['images_per_s']
    c.append((o, t, o / t))
if c:
    print("conv4 step      " + "  ".join(f"{o:.0f}/{t:.0f}={r:.2f}" for o, t, r in c) + f"  median ratio {statistics.median([r for *_, r in c]):.2f}")
