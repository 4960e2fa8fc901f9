"""Kernels of two compiles matched by what they compute.

Two kernels are linked when they compute an instruction with the same key (keys.py).  A key
that several kernels of one side compute (a broadcast XLA duplicated into each of its users)
says nothing about which kernel is which, so it links only a kernel that has no key of its
own.  The connected groups of linked kernels are the matches: one kernel each side is the same
kernel (or the same with another kind, or with partly other instructions), one of A and several
of B a split, several of A and one of B a merge.  In a group of several kernels on both sides
(one line of code applied to every parameter by a tree_map), kernels computing exactly the same
keys, then kernels of one output shape with the most in common, are paired one to one first;
what stays unpaired on both sides is regrouped.  A kernel linked to nothing whose
instructions the other side computes all the same (duplicated into several kernels there) is
merged into those kernels (or split out of them); then, among the kernels still unmatched, a
kernel is matched by opcode and op name alone (a source change moves the lines of the code
around it); what remains is added or removed.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

from .records import (ADDED, CHANGED, CHANGED_KIND, MERGED, REGROUPED, REMOVED, SAME, SPLIT, KernelMatch)
from .side import SideIndex


def match_kernels(a: SideIndex, b: SideIndex) -> tuple[KernelMatch, ...]:
    links_a, links_b = _links(a), _links(b)
    parent: dict[tuple, tuple] = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(x, y):
        parent[find(x)] = find(y)

    by_key_b: dict = defaultdict(list)
    for kid, keys in links_b.items():
        find(("b", kid))
        for key in keys:
            by_key_b[key].append(kid)
    for kid, keys in links_a.items():
        find(("a", kid))
        for key in keys:
            for other in by_key_b.get(key, ()):
                union(("a", kid), ("b", other))
    groups: dict[tuple, list[tuple]] = defaultdict(list)
    order = [("a", kid) for kid in a.kernel_keys] + [("b", kid) for kid in b.kernel_keys]
    for node in order:
        groups[find(node)].append(node)
    matches = [m for nodes in groups.values()
               for m in _matches(a, b, [k for s, k in nodes if s == "a"], [k for s, k in nodes if s == "b"])]
    matches = [_absorbed(a, b, m) for m in matches]
    return tuple(_loosely(a, b, matches))


def _absorbed(a: SideIndex, b: SideIndex, m: KernelMatch) -> KernelMatch:
    """A removed kernel whose instructions B computes inside other kernels was merged into
    them (an added one, split out of A's)."""
    if m.status not in (ADDED, REMOVED) or len(m.a) + len(m.b) != 1:
        return m
    own, other = (a, b) if m.status == REMOVED else (b, a)
    kid = (m.a or m.b)[0]
    keys = own.kernel_keys[(kid.computation, kid.name)]
    anchored = [k for k in keys if k.anchored]
    if not anchored or any(k not in other.kernels_of for k in anchored):
        return m
    found = [k for k in keys if k in other.kernels_of]
    hosts = list(dict.fromkeys(h for k in found for h in other.kernels_of[k]))
    refs = tuple(other.ref(h) for h in hosts)
    shared = sum(keys[k] for k in found)
    if m.status == REMOVED:
        return replace(m, status=MERGED, b=refs, shared=shared, only_a=m.only_a - shared, hosts=True)
    return replace(m, status=SPLIT, a=refs, shared=shared, only_b=m.only_b - shared, hosts=True)


def _loosely(a: SideIndex, b: SideIndex, matches: list[KernelMatch]) -> list[KernelMatch]:
    """Pair what is still added with what is still removed by opcode and op name alone, the
    most shared first (one to one); the rest stays added or removed."""
    removed = [m for m in matches if m.status == REMOVED]
    added = [m for m in matches if m.status == ADDED]
    if not removed or not added:
        return matches

    def loose(side: SideIndex, ref) -> Counter:
        return Counter((k.opcode, k.op) for k in side.kernel_keys[(ref.computation, ref.name)].elements())

    pairs = []
    for i, r in enumerate(removed):
        for j, d in enumerate(added):
            common = sum((loose(a, r.a[0]) & loose(b, d.b[0])).values())
            if common and r.a[0].label == d.b[0].label:
                pairs.append((-common, i, j))
    used_r, used_a, paired = set(), set(), {}
    for _, i, j in sorted(pairs):
        if i not in used_r and j not in used_a:
            used_r.add(i)
            used_a.add(j)
            paired[id(removed[i])] = added[j]
    dropped = {id(added[j]) for j in used_a}
    out = []
    for m in matches:
        if id(m) in dropped:
            continue
        if id(m) in paired:
            d = paired[id(m)]
            common = loose(a, m.a[0]) & loose(b, d.b[0])
            shared = sum(common.values())
            only_a, only_b = m.only_a - shared, d.only_b - shared
            status = CHANGED if only_a or only_b else SAME
            out.append(KernelMatch(status, m.a, d.b, shared, only_a, only_b, loose=True))
        else:
            out.append(m)
    return out


def _links(side: SideIndex) -> dict[tuple, set]:
    """The keys each kernel is linked by: those no other kernel of its side computes, or all
    its keys when it has none of its own."""
    count = Counter(key for keys in side.kernel_keys.values() for key in keys)
    out = {}
    for kid, keys in side.kernel_keys.items():
        own = {key for key in keys if count[key] == 1}
        out[kid] = own or set(keys)
    return out


def _matches(a: SideIndex, b: SideIndex, in_a: list, in_b: list) -> list[KernelMatch]:
    """The matches of one connected group: kernels that compute exactly the same keys are
    paired off first (two slices of one iota on one line cannot be told apart, and need not
    be), the rest is one match."""
    if len(in_a) == 1 or len(in_b) == 1:
        return [_match(a, b, in_a, in_b)]
    out, rest_b = [], list(in_b)
    rest_a = []
    for ka in in_a:
        twin = next((kb for kb in rest_b if b.kernel_keys[kb] == a.kernel_keys[ka]
                     and b.kernels[kb].label == a.kernels[ka].label), None)
        if twin is None:
            rest_a.append(ka)
        else:
            rest_b.remove(twin)
            out.append(_match(a, b, [ka], [twin]))
    paired, rest_a, rest_b = _pair_off(a, b, rest_a, rest_b)
    out += [_match(a, b, [ka], [kb]) for ka, kb in paired]
    if rest_a and rest_b:
        out.append(_match(a, b, rest_a, rest_b))
    else:  # each kernel left on one side alone: removed or added, or computed inside the other's
        out += [_match(a, b, [k], []) for k in rest_a] + [_match(a, b, [], [k]) for k in rest_b]
    return out


def _pair_off(a: SideIndex, b: SideIndex, in_a: list, in_b: list):
    """Several kernels each side that share instructions (one line of code applied to every
    parameter by a tree_map): paired one to one, kernels of the same output shape first, then
    by the share of their instructions in common; those left unpaired stay together."""
    if len(in_a) < 2 or len(in_b) < 2:
        return [], in_a, in_b
    scored = []
    for i, ka in enumerate(in_a):
        for j, kb in enumerate(in_b):
            keys_a, keys_b = a.kernel_keys[ka], b.kernel_keys[kb]
            common = sum((keys_a & keys_b).values())
            if common:
                union = sum((keys_a | keys_b).values())
                scored.append((a.output_shape(ka) != b.output_shape(kb), -common / union, i, j))
    used_a, used_b, pairs = set(), set(), []
    for _, _, i, j in sorted(scored):
        if i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            pairs.append((in_a[i], in_b[j]))
    return (pairs, [k for i, k in enumerate(in_a) if i not in used_a],
            [k for j, k in enumerate(in_b) if j not in used_b])


def _match(a: SideIndex, b: SideIndex, in_a: list, in_b: list) -> KernelMatch:
    keys_a = sum((a.kernel_keys[k] for k in in_a), Counter())
    keys_b = sum((b.kernel_keys[k] for k in in_b), Counter())
    shared = sum((keys_a & keys_b).values())
    only_a, only_b = sum((keys_a - keys_b).values()), sum((keys_b - keys_a).values())
    refs_a, refs_b = tuple(a.ref(k) for k in in_a), tuple(b.ref(k) for k in in_b)
    if not in_b:
        status = REMOVED
    elif not in_a:
        status = ADDED
    elif len(in_a) == 1 and len(in_b) == 1:
        if only_a or only_b:
            status = CHANGED
        else:
            status = SAME if refs_a[0].label == refs_b[0].label else CHANGED_KIND
    elif len(in_a) == 1:
        status = SPLIT
    elif len(in_b) == 1:
        status = MERGED
    else:
        status = REGROUPED
    return KernelMatch(status, refs_a, refs_b, shared, only_a, only_b)
