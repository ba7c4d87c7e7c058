"""Candidates for the static base of the URL store (issue 35): bytes per URL of front-coded
blocks of B keys on the sorted canonical keys, by how the records' key bytes are coded.

    python -m benchmarks.urlbase_bytes urls domains openphish

Per list set and block size B (8-64): the record header (varint lcp << 1 | no-prefix flag, one
byte for the code length), the key bytes of a record (the whole key at a block start, the tail
after the lcp with the previous key otherwise) raw, coded with a byte-pair symbol table (254
symbols of 1-8 bytes trained on 30,000 tails, greedy longest match; the code urlfilter/urlstore.py
builds) and with a static Huffman code over bytes padded to whole bytes per record; plus the
index (12 B per block here: offset + 8-byte head; the store uses 16-byte heads, 20 B) and 0.25 B
of payload index. Measured on 40,000 sampled keys (tails) per set. The measurement behind
docs/urlfilter.md's "The URL store" table; nothing here runs in the store.
"""
import collections
import heapq
import sys
import time

import numpy as np
from benchmarks.bench_urltree import DOMAIN_LISTS, URL_LISTS, read_lines
from urlfilter.canon import canonicalize_many
from urlfilter.tree import arrow_layout

def keys_of(rels):
    raw=[]
    for r in rels: raw += read_lines(r)
    raw=list(dict.fromkeys(raw))
    d,o=arrow_layout(raw)
    ks,codes=canonicalize_many(d,o,key=True)
    return sorted({k.encode('latin-1') if isinstance(k,str) else k for k,c in zip(ks,codes) if c==0})

def bpe_train(tails, nsym=254, maxlen=8):
    # tails: list of bytes; returns list of symbols (bytes)
    sep = 0xFFFF
    parts=[]
    for t in tails:
        parts.append(np.frombuffer(t,np.uint8).astype(np.int32)); parts.append(np.array([-1],np.int32))
    a=np.concatenate(parts)
    syms={}
    for b in np.unique(a[a>=0]): syms[int(b)]=bytes([int(b)])
    nxt=256
    while len(syms)<nsym:
        x=a[:-1]; y=a[1:]
        ok=(x>=0)&(y>=0)
        lens=np.zeros(nxt+1,np.int64)
        for c,s in syms.items(): lens[c]=len(s)
        ok &= (lens[np.maximum(x,0)]+lens[np.maximum(y,0)])<=maxlen
        if not ok.any(): break
        pk=x[ok].astype(np.int64)*4096+y[ok]
        u,cnt=np.unique(pk,return_counts=True)
        i=int(np.argmax(cnt))
        if cnt[i]<4: break
        p,q=divmod(int(u[i]),4096)
        pos=np.flatnonzero((x==p)&(y==q))
        if p==q:  # avoid overlaps: drop positions right after a kept one
            keep=[];last=-2
            for j in pos:
                if j!=last+1: keep.append(j); last=j
            pos=np.array(keep)
        a[pos]=nxt; a[pos+1]=-2
        a=a[a!=-2]
        syms[nxt]=syms[p]+syms[q]; nxt+=1
    return list(syms.values())

def greedy_len(t, byfirst):
    i=0;out=0
    while i<len(t):
        for s in byfirst.get(t[i],()):
            if t.startswith(s,i):
                out+=1;i+=len(s);break
        else:
            out+=2;i+=1
    return out

def vl(v):
    n=1
    while v>=0x80: v>>=7;n+=1
    return n

def measure(name, keys, B_list=(8,16,32,64)):
    n=len(keys)
    lc=[0]*n
    for i in range(1,n):
        a,b=keys[i-1],keys[i]; m=min(len(a),len(b)); j=0
        while j<m and a[j]==b[j]: j+=1
        lc[i]=j
    rng=np.random.default_rng(1)
    sample=[keys[i][lc[i]:] for i in rng.choice(n,min(n,30000),replace=False)]
    t0=time.time(); syms=bpe_train(sample); tt=time.time()-t0
    byfirst=collections.defaultdict(list)
    for s in sorted(syms,key=len,reverse=True): byfirst[s[0]].append(s)
    # huffman over all tails bytes
    tails=b''.join(keys[i][lc[i]:] for i in range(n))
    cnt=np.bincount(np.frombuffer(tails,np.uint8),minlength=256)
    # huffman code lengths
    h=[(int(c),[b]) for b,c in enumerate(cnt) if c>0]; L=np.zeros(256,int)
    heapq.heapify(h)
    while len(h)>1:
        c1,s1=heapq.heappop(h);c2,s2=heapq.heappop(h)
        for b in s1+s2: L[b]+=1
        heapq.heappush(h,(c1+c2,s1+s2))
    # sample of positions for coded lengths
    idx=rng.choice(n,min(n,40000),replace=False)
    mean_key=np.mean([len(k) for k in keys])
    print(f"## {name}: {n} keys, mean {mean_key:.2f} B, tail vs pred {len(tails)/n:.2f} B; bpe train {tt:.1f}s, {len(syms)} syms")
    for B in B_list:
        raw=0;bpe=0;huf=0;hdr=0
        for i in idx:
            first=(i%B==0)
            t=keys[i] if first else keys[i][lc[i]:]
            l=0 if first else lc[i]
            raw+=len(t)
            bpe+=greedy_len(t,byfirst)
            hb=int(sum(L[c] for c in t))
            huf+=(hb+7)//8
            hdr+=vl(l<<1)
        s=len(idx)
        raw/=s;bpe/=s;huf/=s;hdr/=s
        idx_b=12/B
        payload=0.25
        # raw: header + len varint
        print(f"B={B:3d}: hdr(lcp|np) {hdr:.2f} | raw tail {raw:.2f}+len1 -> {hdr+raw+1+idx_b+payload:.2f} B/URL"
              f" | bpe {bpe:.2f}+nbytes1 -> {hdr+bpe+1+idx_b+payload:.2f} | huffman(byte-padded) {huf:.2f}+nbytes1 -> {hdr+huf+1+idx_b+payload:.2f}  (index {idx_b:.2f}, payload {payload})")
    sys.stdout.flush()

sets={'urls':URL_LISTS,'domains':DOMAIN_LISTS,'openphish':['openphish/urls-history.gz']}
if __name__ == "__main__":
    for nm in sys.argv[1:] or list(sets):
        measure(nm, keys_of(sets[nm]))
