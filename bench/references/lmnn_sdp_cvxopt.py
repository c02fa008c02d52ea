#!/usr/bin/env python3
"""Interior-point reference for the LMNN study's solver (issue 35).

Reads a problem written by `lmnn_sdp_export` (training points, pull pairs,
triplets, c, and our projected sub-gradient solver's M and objective) and solves
the same semidefinite program with CVXOPT's primal-dual interior-point method
(Debian: python3-cvxopt), the kind of solver the paper used (CVX):

    min_M,xi  sum_(i,j) in pull  d_M(i,j)  +  c sum_t xi_t
    s.t.      d_M(i,l) - d_M(i,j) >= 1 - xi_t,  xi_t >= 0,  M PSD,
    d_M(a,b) = (x_a - x_b)^T M (x_a - x_b).

It prints both objectives and the k-NN test accuracy with both metrics, and with
--check fails (exit 1) when our objective is above the interior-point optimum by
more than --rel-tol (relative). Exit 77 when CVXOPT is missing (ctest: skipped).

    python3 bench/references/lmnn_sdp_cvxopt.py --check problem.json [...]
"""
import argparse
import json
import sys

import numpy as np

try:
    import cvxopt
    from cvxopt import solvers
except ImportError:  # pragma: no cover
    print("SKIP: python3-cvxopt is not installed (apt-get install python3-cvxopt)")
    sys.exit(77)


def vech_index(d):
    """(a, b) with a <= b for each free entry of the symmetric M."""
    return [(a, b) for a in range(d) for b in range(a, d)]


def quad_row(v, idx):
    """Coefficients of v^T M v in the free entries of M (off-diagonals count twice)."""
    return np.array([v[a] * v[b] * (1.0 if a == b else 2.0) for a, b in idx])


def solve_sdp(p):
    X = np.asarray(p["X"], dtype=np.float64)
    d = X.shape[1]
    idx = vech_index(d)
    m = len(idx)
    trip = p["triplets"]
    T = len(trip)
    c = float(p["c"])
    # Objective over x = [vech(M) (m), xi (T)].
    pull = np.zeros(m)
    for i, j in p["pull"]:
        pull += quad_row(X[i] - X[j], idx)
    cost = np.concatenate([pull, c * np.ones(T)])
    # Linear inequalities G x <= h: -(d_il - d_ij) - xi <= -1 and -xi <= 0 (sparse in xi).
    rows, cols, vals = [], [], []
    h = np.zeros(2 * T)
    for t, (i, j, l) in enumerate(trip):
        coef = quad_row(X[i] - X[j], idx) - quad_row(X[i] - X[l], idx)
        for q in np.nonzero(coef)[0]:
            rows.append(t)
            cols.append(int(q))
            vals.append(float(coef[q]))
        rows.append(t)
        cols.append(m + t)
        vals.append(-1.0)
        h[t] = -1.0
        rows.append(T + t)
        cols.append(m + t)
        vals.append(-1.0)
    Gl = cvxopt.spmatrix(vals, rows, cols, (2 * T, m + T))
    # M PSD: -M as a d x d block (column-major vec), i.e. Gs x + s = 0, s PSD.
    Gs = np.zeros((d * d, m + T))
    for q, (a, b) in enumerate(idx):
        Gs[a + b * d, q] = -1.0
        Gs[b + a * d, q] = -1.0
    solvers.options["show_progress"] = False
    solvers.options["abstol"] = 1e-9
    solvers.options["reltol"] = 1e-9
    solvers.options["feastol"] = 1e-9
    sol = solvers.sdp(cvxopt.matrix(cost), Gl=Gl, hl=cvxopt.matrix(h),
                      Gs=[cvxopt.matrix(Gs)], hs=[cvxopt.matrix(np.zeros((d, d)))])
    x = np.array(sol["x"]).ravel()
    M = np.zeros((d, d))
    for q, (a, b) in enumerate(idx):
        M[a, b] = M[b, a] = x[q]
    return M, sol["status"]


def objective(p, M):
    X = np.asarray(p["X"], dtype=np.float64)
    dist = lambda a, b: float((X[a] - X[b]) @ M @ (X[a] - X[b]))
    f = sum(dist(i, j) for i, j in p["pull"])
    f += float(p["c"]) * sum(max(0.0, 1.0 + dist(i, j) - dist(i, l)) for i, j, l in p["triplets"])
    return f


def knn_accuracy(p, M, k):
    """k-NN test accuracy (%) under M; a tie goes to the tied class of the nearest
    (the study's rule, experiments/lmnn_mining/experiment.cpp)."""
    w, V = np.linalg.eigh((M + M.T) / 2)
    L = V * np.sqrt(np.clip(w, 0, None))
    Z = np.asarray(p["X"]) @ L
    Zt = np.asarray(p["Xtest"]) @ L
    y = np.asarray(p["y"])
    correct = 0
    for z, yt in zip(Zt, p["ytest"]):
        dd = ((Z - z) ** 2).sum(1)
        order = np.argsort(dd, kind="stable")[:k]
        labels = y[order]
        vals, counts = np.unique(labels, return_counts=True)
        best = set(vals[counts == counts.max()])
        pred = next(l for l in labels if l in best)
        correct += pred == yt
    return 100.0 * correct / len(p["ytest"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+", help="JSON files written by lmnn_sdp_export")
    ap.add_argument("--check", action="store_true", help="exit 1 if ours is above the optimum by more than --rel-tol")
    ap.add_argument("--rel-tol", type=float, default=0.01)
    a = ap.parse_args()
    failed = 0
    for path in a.problems:
        with open(path) as f:
            p = json.load(f)
        M_ip, status = solve_sdp(p)
        M_ours = np.asarray(p["M_ours"])
        f_ip, f_ours = objective(p, M_ip), objective(p, M_ours)
        gap = (f_ours - f_ip) / max(abs(f_ip), 1e-12)
        k = int(p["k"])
        print(f"{p['dataset']} {p['mining']} k={k} c={p['c']}: {len(p['triplets'])} triplets, "
              f"d={len(p['X'][0])}; interior point ({status}) objective {f_ip:.6g}, ours {f_ours:.6g} "
              f"(binary said {p['objective_ours']:.6g}, {p['iterations_ours']} steps), ours above by "
              f"{100 * gap:.3f} %; |M|_F interior point {np.linalg.norm(M_ip):.4g}, ours "
              f"{np.linalg.norm(M_ours):.4g}; k-NN test: interior point {knn_accuracy(p, M_ip, k):.2f}, "
              f"ours {knn_accuracy(p, M_ours, k):.2f} (binary said {p['test_accuracy_ours']:.2f}), "
              f"Euclidean {p['test_accuracy_euclidean']:.2f}")
        if status != "optimal":
            print(f"  note: CVXOPT status {status}")
        if a.check and gap > a.rel_tol:
            print(f"  FAIL: ours is {100 * gap:.3f} % above the interior-point optimum (> {100 * a.rel_tol} %)")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
