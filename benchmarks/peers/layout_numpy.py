"""NumPy peer of kernels/layout: fused_embedding_to_layout v5 forward and gradient.

Usage: layout_numpy.py DIR REPS

Reads the inputs benchmarks/peers exported into DIR (config.json; fid_offset, feature_offset,
nfl_offset and emb_size from sharding; emb, the K = tables x ps embedding tensors back to
back; grad_<i>, the gradient of every layout output), runs the forward and the backward pass
once to warm up and then REPS times each, writes the last results (out_<i>.npy, one per
layout output, and emb_grad_<k>.npy, one per embedding tensor) and prints one JSON line:
{"numpy": ..., "python": ..., "forward_sec": [...], "backward_sec": [...]}.

This is the vectorised code a NumPy user would write: no Python loop per row, entry or fid.
Everything derived from the layout config alone is prepared once (Plan); every index array
derived from the sharding outputs is rebuilt inside each timed pass (index), since those
change with every batch. Semantics: data-path.md section 4 (SUM, MEAN dividing every term
before summing, FIRSTN, shared features, ADDN, CONCAT/STACK/NONE with decision D1).
"""

import json
import os
import sys
import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

F32 = np.float32


def ranges(begin, count):
    """The concatenation of arange(b, b+c) for every (b, c)."""
    total = int(count.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    skip = np.cumsum(count) - count
    return np.repeat(begin - skip, count) + np.arange(total)


class Group:
    """Features pooled over the same columns [lo, hi) with the same pooling (SUM or MEAN)."""

    def __init__(self, lo, hi, mean, feats):
        self.lo, self.hi, self.mean = lo, hi, mean
        self.span = hi - lo
        self.feats = np.array(feats, np.int64)


class Set:
    """Slices of one layout written the same way: one gather forward, one scatter backward."""

    def __init__(self, kind, group, start, width, seq):
        self.kind = kind  # "pool" or "firstn"
        self.group = group  # Group index (pool)
        self.start, self.width, self.seq = start, width, seq
        self.feats = []
        self.outs = []  # NONE: the output of every slice
        self.cols = []  # CONCAT/STACK: the columns of every slice, in gather order
        self.out = -1  # CONCAT/STACK/ADDN: the output
        self.none = False
        self.addn = False
        self.place = None  # ("whole",) | ("range", c0, c1) | ("cols", cols)


class Plan:
    """Everything derived from the layout config alone."""

    def __init__(self, cfg):
        feats = cfg["features"]
        self.B = cfg["batch_size"]
        self.F = len(feats)
        self.maxdim = max(f["dim"] for f in feats)
        lo, hi = {}, {}
        for lay in cfg["layouts"]:
            for s in lay["slices"]:
                if s["pooling"] != "FIRSTN":
                    n = s["feature"]
                    lo[n] = min(lo.get(n, s["start"]), s["start"])
                    hi[n] = max(hi.get(n, s["end"]), s["end"])
        keys = {}
        for n in sorted(lo):
            keys.setdefault((lo[n], hi[n], feats[n]["pooling"] == "MEAN"), []).append(n)
        self.groups = [Group(k[0], k[1], k[2], v) for k, v in keys.items()]
        self.gid = np.full(self.F, -1, np.int64)
        self.fpos = np.full(self.F, -1, np.int64)  # position of a feature in its group
        for g, grp in enumerate(self.groups):
            self.gid[grp.feats] = g
            self.fpos[grp.feats] = np.arange(len(grp.feats))

        self.shapes = []  # shape of every output, batch first
        self.sets = []
        for lay in cfg["layouts"]:
            self._layout(lay)
        self.by_group = [[s for s in self.sets if s.kind == "pool" and s.group == g] for g in range(len(self.groups))]
        for s in self.sets:
            s.feats = np.array(s.feats, np.int64)
            if s.kind == "pool":
                g = self.groups[s.group]
                s.fpos = self.fpos[s.feats]
                s.a = s.start - g.lo  # first column of the slice in the group's span
            if not s.none and not s.addn:
                cols = np.concatenate(s.cols)
                row = int(np.prod(self.shapes[s.out][1:]))
                c0 = int(cols[0])
                if np.array_equal(cols, np.arange(c0, c0 + len(cols))):
                    s.place = ("whole",) if c0 == 0 and len(cols) == row else ("range", c0, c0 + len(cols))
                else:
                    s.place = ("cols", cols)

    def _layout(self, lay):
        t, sl = lay["out_type"], lay["slices"]
        B = self.B
        widths = [s["end"] - s["start"] for s in sl]
        seqs = [s["max_seq_len"] if s["pooling"] == "FIRSTN" else 0 for s in sl]
        L = max(seqs)  # CONCAT and STACK: one sequence length for the whole layout
        first = len(self.shapes)
        if t == "NONE":
            shapes = [[B, q, w] if q else [B, w] for q, w in zip(seqs, widths)]
        elif t == "CONCAT":
            shapes = [[B, L, sum(widths)] if L else [B, sum(widths)]]
        elif t == "STACK":
            shapes = [[B, len(sl), L, widths[0]] if L else [B, len(sl), widths[0]]]
        elif t == "ADDN":
            shapes = [[B, widths[0]]]
        else:
            raise ValueError(f"layout {lay['name']}: out type {t}")
        want = [[B if d == -1 else d for d in sh] for sh in lay["shapes"]]
        if shapes != want:
            raise ValueError(f"layout {lay['name']}: shapes {want}, the slices imply {shapes}")
        self.shapes += shapes

        sets = {}
        total, off = sum(widths), 0
        for i, s in enumerate(sl):
            n, w, q = s["feature"], widths[i], seqs[i]
            kind = "firstn" if q else "pool"
            key = (kind, int(self.gid[n]) if not q else -1, s["start"], w, q)
            cands = sets.setdefault(key, [])
            # A feature appears at most once per set, so that the backward += never collides.
            st = next((c for c in cands if n not in c.feats), None)
            if st is None:
                st = Set(kind, key[1], s["start"], w, q)
                st.none, st.addn = t == "NONE", t == "ADDN"
                st.out = -1 if t == "NONE" else first
                cands.append(st)
                self.sets.append(st)
            st.feats.append(n)
            k = np.arange(w)
            if t == "NONE":
                st.outs.append(first + i)
            elif t == "CONCAT":  # position p at p*total + offset (D1)
                st.cols.append((off + k if not q else (np.arange(q)[:, None] * total + off + k).ravel()))
            elif t == "STACK":  # slice i at i*L*w (D1)
                st.cols.append(i * max(q, 1) * w + np.arange(max(q, 1) * w))
            off += w


class Index:
    """Index arrays of one batch, derived from the sharding outputs."""

    def __init__(self, plan, fid_offset, feature_offset, nfl_offset, emb_size, zero_emb):
        B = plan.B
        nfl = nfl_offset.astype(np.int64)
        start = nfl & 0x7FFFFFFF
        shared = (nfl[:-1] >> 31) != 0
        # Entries of every feature: B, 1 when shared, 0 when absent (nfl_offset ends at E+1).
        cnt = np.where(np.diff(start) == 0, 0, np.where(shared, 1, B))
        fo = feature_offset.astype(np.int64)
        E = len(fo) - 1
        if (start[:-1] + cnt > E).any() or fo[-1] != len(fid_offset):
            raise ValueError(f"nfl_offset {nfl_offset} does not fit {E} entries, or feature_offset ends at {fo[-1]} for {len(fid_offset)} fids")
        ne = np.diff(fo)
        base = np.zeros(len(emb_size), np.int64)
        np.cumsum(emb_size[:-1], out=base[1:])
        halves = fid_offset.view(np.uint32).reshape(-1, 2)  # little endian: (index2, index1)
        nfid = len(fid_offset)
        goff = np.empty(nfid + 1, np.int64)  # float offset of every fid; the last is a zero row
        np.add(base[halves[:, 1]], halves[:, 0], out=goff[:nfid])
        goff[nfid] = zero_emb
        # Entry of every (row, feature); E (no fids) for an absent feature.
        ent = start[:-1] + np.where(shared, 0, np.arange(B)[:, None])
        ent[:, cnt == 0] = E
        self.B, self.E, self.nfid = B, E, nfid
        self.start, self.cnt, self.shared, self.fo, self.goff, self.ent = start, cnt, shared, fo, goff, ent
        self.ne = np.append(ne, 0)
        self.groups = []
        for g in plan.groups:
            present = g.feats[cnt[g.feats] > 0]
            eb, ec = start[present], cnt[present]
            ents = ranges(eb, ec)
            # The float offsets of the group's fids: every feature's fids are contiguous.
            gsel = np.concatenate([goff[a:b] for a, b in zip(fo[eb], fo[eb + ec])] or [goff[:0]])
            self.groups.append((present, ec, ents, gsel, self.ne[ents]))


def forward(plan, ix, emb):
    """The layout outputs of one batch, in output order."""
    B = plan.B
    win = {}

    def window(buf, w):
        key = (id(buf), w)
        if key not in win:
            win[key] = sliding_window_view(buf, w)
        return win[key]

    # Pool every entry of every group once, over the group's columns, into one flat buffer;
    # pos[e] is where entry e's pooled values sit (minus the group's lo), a zero area if none.
    sizes = [len(grp[2]) * g.span for g, grp in zip(plan.groups, ix.groups)]
    zero = sum(sizes)
    pooled = np.empty(zero + plan.maxdim, F32)
    pooled[zero:] = 0
    pos = np.full(ix.E + 1, zero, np.int64)
    at = 0
    for g, (present, ec, ents, gsel, nes), size in zip(plan.groups, ix.groups, sizes):
        dst = pooled[at : at + size].reshape(-1, g.span)
        pos[ents] = at + np.arange(len(ents)) * g.span - g.lo
        at += size
        if len(gsel) == 0:
            dst[:] = 0
            continue
        vals = window(emb, g.span)[gsel + g.lo]
        if g.mean:  # every term divided by its entry's fid count before summing
            vals /= np.repeat(nes, nes).astype(F32)[:, None]
        firsts = np.cumsum(nes) - nes
        if nes.all():
            np.add.reduceat(vals, firsts, axis=0, out=dst)
        else:
            dst[:] = 0
            full = nes > 0
            dst[full] = np.add.reduceat(vals, firsts[full], axis=0)
    rowpos = pos[ix.ent]  # (B, F)

    outs = [None] * len(plan.shapes)
    for s in plan.sets:
        if s.kind == "pool":
            at = rowpos[:, s.feats] + s.start
            if s.none:
                at = at.T
            vals = window(pooled, s.width)[at]  # (B, S, w), NONE (S, B, w)
        else:
            ent = ix.ent[:, s.feats]
            if s.none:
                ent = ent.T
            q = np.arange(s.seq)
            fid = ix.fo[ent][..., None] + q
            fid = np.where(q < ix.ne[ent][..., None], fid, ix.nfid)  # no fid: the zero row
            vals = window(emb, s.width)[ix.goff[fid] + s.start]  # (B, S, L, w), NONE (S, B, L, w)
        if s.none:
            for j, o in enumerate(s.outs):
                outs[o] = vals[j]
        elif s.addn:
            v = vals.sum(axis=1)
            outs[s.out] = v if outs[s.out] is None else outs[s.out] + v
        elif s.place[0] == "whole":
            outs[s.out] = vals.reshape(B, -1)
        else:
            if outs[s.out] is None:
                outs[s.out] = np.zeros((B, int(np.prod(plan.shapes[s.out][1:]))), F32)
            if s.place[0] == "range":
                outs[s.out][:, s.place[1] : s.place[2]] = vals.reshape(B, -1)
            else:
                outs[s.out][:, s.place[1]] = vals.reshape(B, -1)
    return [np.zeros(sh, F32) if o is None else o.reshape(sh) for o, sh in zip(outs, plan.shapes)]


def backward(plan, ix, grads, nemb):
    """The embedding gradient of one batch (flat, nemb floats) from the output gradients."""
    B = plan.B
    flat = [g.reshape(B, -1) for g in grads]
    idx, wts = [], []

    def from_outputs(s, shape):
        """The output gradients of set s in its gather order: (B, S, *shape), NONE (S, B, *shape)."""
        if s.none:
            return np.stack([grads[o] for o in s.outs]).reshape((len(s.outs), B) + shape)
        g = flat[s.out]
        if s.addn:
            return g[:, None, :]
        if s.place[0] == "whole":
            v = g
        elif s.place[0] == "range":
            v = g[:, s.place[1] : s.place[2]]
        else:
            v = g[:, s.place[1]]
        return v.reshape((B, len(s.feats)) + shape)

    for gi, (g, (present, ec, ents, gsel, nes)) in enumerate(zip(plan.groups, ix.groups)):
        if len(gsel) == 0:
            continue
        nf = len(g.feats)
        rows = np.zeros((B, nf, g.span), F32)  # the gradient of every (row, feature) of the group
        for s in plan.by_group[gi]:
            v = from_outputs(s, (s.width,))
            rows[:, s.fpos, s.a : s.a + s.width] += v.swapaxes(0, 1) if s.none else v
        table = rows.reshape(B * nf, g.span)
        feat = np.repeat(present, ec)
        row = (ents - ix.start[feat]) * nf + plan.fpos[feat]
        sh = ix.shared[feat]
        if sh.any():  # a shared entry receives the sum of every row's gradient
            shf = present[ix.shared[present]]
            table = np.concatenate([table, rows[:, plan.fpos[shf]].sum(axis=0)])
            slot = np.full(plan.F, -1, np.int64)
            slot[shf] = np.arange(len(shf))
            row[sh] = B * nf + slot[feat[sh]]
        gent = table[row]
        if g.mean:
            gent /= np.maximum(nes, 1).astype(F32)[:, None]
        wts.append(gent[np.repeat(np.arange(len(ents)), nes)].ravel())
        idx.append(((gsel + g.lo)[:, None] + np.arange(g.span)).ravel())

    for s in plan.sets:
        if s.kind != "firstn":
            continue
        ent = ix.ent[:, s.feats]
        if s.none:
            ent = ent.T
        q = np.arange(s.seq)
        fid = ix.fo[ent][..., None] + q
        ok = q < ix.ne[ent][..., None]
        v = from_outputs(s, (s.seq, s.width))
        wts.append(v[ok].ravel())
        idx.append(((ix.goff[fid[ok]] + s.start)[:, None] + np.arange(s.width)).ravel())

    if not idx:
        return np.zeros(nemb, F32)
    return np.bincount(np.concatenate(idx), weights=np.concatenate(wts), minlength=nemb).astype(F32)


def main():
    d, reps = sys.argv[1], int(sys.argv[2])
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    plan = Plan(cfg)
    load = lambda name: np.load(os.path.join(d, name + ".npy"))
    fid_offset, feature_offset = load("fid_offset"), load("feature_offset")
    nfl_offset, emb_size = load("nfl_offset"), load("emb_size")
    nemb = int(emb_size.sum())
    # The embedding tensors back to back in one buffer, with a zero tail for absent fids.
    emb = np.zeros(nemb + plan.maxdim, F32)
    emb[:nemb] = load("emb")
    grads = [load(f"grad_{i}") for i in range(len(plan.shapes))]

    def fwd():
        ix = Index(plan, fid_offset, feature_offset, nfl_offset, emb_size, nemb)
        return forward(plan, ix, emb)

    def bwd():
        ix = Index(plan, fid_offset, feature_offset, nfl_offset, emb_size, nemb)
        return backward(plan, ix, grads, nemb)

    def timed(fn):
        fn()  # warm-up
        secs, out = [], None
        for _ in range(reps):
            t0 = time.perf_counter()
            out = fn()
            secs.append(time.perf_counter() - t0)
        return secs, out

    fsec, outs = timed(fwd)
    bsec, eg = timed(bwd)
    for i, o in enumerate(outs):
        np.save(os.path.join(d, f"out_{i}.npy"), np.ascontiguousarray(o))
    at = 0
    for k, n in enumerate(emb_size):
        np.save(os.path.join(d, f"emb_grad_{k}.npy"), eg[at : at + n])
        at += int(n)
    print(json.dumps({"numpy": np.__version__, "python": sys.version.split()[0], "forward_sec": fsec, "backward_sec": bsec}))


if __name__ == "__main__":
    main()
