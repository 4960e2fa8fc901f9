"""Heroes: the instruction that decides how a fusion is emitted (a reduction, a tiled
transpose, a concatenate) once trivial elementwise epilogues are looked through
(ir_emission_utils.cc FindNonTrivialHero; gpu_fusible.cc GetRealHeroForMultiOutputFusion,
FusionHeroesAreCompatible, ShapesCompatibleForMultiOutputFusion).

Hero compatibility and shape compatibility return None when compatible, else XLA's reason
string (the caller turns it into a rule decision)."""

from __future__ import annotations


from ..attributes import dimensions
from ..graph import Node, graph_cache  # noqa: F401  (graph_cache: re-exported)
from .config import GpuConfig
from .properties import fusion_roots, is_elementwise, is_multi_output_fusion
from .reductions import is_contiguous_reduction, is_real_reduction_hero, reductions_mof_compatible
from .shapes import equal, equal_ignoring_element_type, is_reshape_or_transpose_bitcast, reshape_is_bitcast, \
    transpose_is_bitcast
from .transposes import tiled_transpose


def is_intermediate(node: Node, allowed_operand_count: int = 1) -> bool:
    """IsIntermediate: 1..k operands and elementwise (a copy only when it keeps the shape and
    layout), or a bitcast, or a reshape/transpose that is a bitcast."""
    n = len(node.operands)
    if n == 0 or n > allowed_operand_count:
        return False
    if is_elementwise(node):
        if node.opcode == "copy":
            return equal(node.shape, node.operands[0].shape)
        return True
    if node.opcode == "bitcast":
        return True
    if node.opcode == "reshape":
        return reshape_is_bitcast(node.operands[0].shape, node.shape)
    if node.opcode == "transpose":
        return transpose_is_bitcast(node.operands[0].shape, node.shape, dimensions(node))
    return False


def _inside(node: Node, graph) -> bool:
    """Whether `node` counts as inside the fusion being analysed: fused parameters stand for
    outside values (XLA's fusion adaptor maps them to the fusion's operands)."""
    return node.graph is graph and node.opcode != "parameter"


def _hero_tables(graph, cfg: GpuConfig):
    """For every instruction of a fusion computation, computed once per version: the tiled
    transposes and the concatenates (at most two of each) reachable from it through
    intermediate ops (up to 3 operands), and whether some non-trivial op reads its value
    downstream.  FindNonTrivialHero's two searches are lookups in these tables."""
    cache = graph_cache(graph)
    key = ("hero-tables", cfg.token)
    found = cache.get(key)
    if found is not None:
        return found
    order = graph.post_order()
    intermediate = {n.uid: is_intermediate(n, 3) for n in order}
    transposes: dict[int, tuple] = {}
    concats: dict[int, tuple] = {}
    tests = ((transposes, lambda n: tiled_transpose(n, cfg) is not None),
             (concats, lambda n: n.opcode == "concatenate"))
    for node in order:  # operands before users
        if node.opcode == "parameter":
            continue
        for table, test in tests:
            if test(node):
                table[node.uid] = (node,)
            elif not intermediate[node.uid]:
                table[node.uid] = ()
            else:
                acc: list[Node] = []
                for op in node.operands:
                    for hero in table.get(op.uid, ()) if _inside(op, graph) else ():
                        if not any(hero is h for h in acc):
                            acc.append(hero)
                    if len(acc) > 1:
                        break
                table[node.uid] = tuple(acc[:2])
    nontrivial_below: dict[int, bool] = {}
    for node in reversed(order):  # users before operands
        nontrivial_below[node.uid] = any(
            user.graph is graph and (
                (user.opcode not in ("tuple", "parameter") and not intermediate.get(user.uid, False))
                or nontrivial_below.get(user.uid, False))
            for user in node.users)
    found = cache[key] = (transposes, concats, nontrivial_below)
    return found


def hero_search_reaches(root: Node, target: Node) -> bool:
    """Whether FindNonTrivialHero, started at `root`, could look at `target` (a fused
    parameter): `target` is reachable from `root` through intermediate ops.  When it is not,
    fusing a producer in place of `target` cannot change the root's hero."""
    graph = root.graph
    cache = graph_cache(graph)
    key = ("reaches", target.uid)
    table = cache.get(key)
    if table is None:
        table = {}
        for node in graph.post_order():
            table[node.uid] = node is target or (
                node.opcode != "parameter" and is_intermediate(node, 3)
                and any(table.get(op.uid, False) for op in node.operands))
        cache[key] = table
    return table.get(root.uid, False)


def merged_heroes(producer: Node, consumer: Node, cfg: GpuConfig) -> list[tuple[Node, Node]] | None:
    """(root, hero) of every root of `producer` fused into the fusion `consumer`, as XLA's
    producer-consumer fusion adaptor finds them, without building the fused computation:
    searches that reach the consumer's parameter for the producer continue in the producer.
    None when the pair is outside what this handles (an unfused consumer, a multi-output
    producer)."""
    if producer.fused is not None and producer.fused.root.opcode == "tuple":
        return None
    if consumer.fused is None:
        return _merged_heroes_unfused(producer, consumer, cfg)
    body = consumer.fused
    param = body.parameters[consumer.operand_index(producer)]
    c_tr, c_cc, c_nb = _hero_tables(body, cfg)
    if producer.fused is not None:
        p_body, p_root = producer.fused, producer.fused.root
        p_tr, p_cc, p_nb = _hero_tables(p_body, cfg)
    else:
        p_body, p_root = None, producer
        p_tr = {producer.uid: (producer,) if tiled_transpose(producer, cfg) is not None else ()}
        p_cc = {producer.uid: (producer,) if producer.opcode == "concatenate" else ()}
        p_nb = {producer.uid: False}
    param_users_nontrivial = c_nb.get(param.uid, False)

    out = []
    for root in fusion_roots(body):
        if root is param:
            root = p_root
        hero = root
        while is_intermediate(hero, 1):
            op = hero.operands[0]
            if op is param:
                op = p_root
            elif op.opcode == "parameter" or op.graph not in (body, p_body) or op.graph is None:
                break
            if op is producer and p_body is None:
                hero = op
                break
            hero = op
        chosen = None
        for table_c, table_p in ((c_tr, p_tr), (c_cc, p_cc)):
            found = _hero_candidates(table_c, table_p, hero, producer, p_body, param, p_root)
            if len(found) == 1 and not _nontrivial_after(found[0], producer, p_body, p_nb, c_nb,
                                                         param_users_nontrivial):
                chosen = found[0]
                break
        if chosen is None:
            chosen = hero if hero.opcode == "reduce" else root
        out.append((root, chosen))
    return out


# Helpers of merged_heroes, at module level rather than closures: compiled by mypyc
# (hlofuse.native), closures sharing a scope hold each other through that scope, a cycle per
# call that only the collector frees.
def _in_producer(node: Node, producer: Node, p_body) -> bool:
    return node is producer or (p_body is not None and node.graph is p_body)


def _hero_candidates(table_c, table_p, node: Node, producer: Node, p_body, param: Node, p_root: Node) -> list[Node]:
    if _in_producer(node, producer, p_body):
        found = list(table_p.get(node.uid, ()))
    else:
        found = list(table_c.get(node.uid, ()))
        if hero_search_reaches(node, param):
            found += [h for h in table_p.get(p_root.uid, ()) if not any(h is f for f in found)]
    return found[:2]


def _nontrivial_after(hero: Node, producer: Node, p_body, p_nb, c_nb, param_users_nontrivial: bool) -> bool:
    if _in_producer(hero, producer, p_body):
        return p_nb.get(hero.uid, False) or param_users_nontrivial
    return c_nb.get(hero.uid, False)


def _producer_tables(producer: Node, cfg: GpuConfig):
    """(root, transposes, concatenates, non-trivial-below) of a producer's computation, or of
    an unfused producer as a computation of one instruction."""
    if producer.fused is not None:
        return (producer.fused.root,) + _hero_tables(producer.fused, cfg)
    return (producer, {producer.uid: (producer,) if tiled_transpose(producer, cfg) is not None else ()},
            {producer.uid: (producer,) if producer.opcode == "concatenate" else ()}, {producer.uid: False})


def _merged_heroes_unfused(producer: Node, consumer: Node, cfg: GpuConfig) -> list[tuple[Node, Node]]:
    """merged_heroes for an unfused consumer: a fusion whose root is the consumer and whose
    only other inside value is the producer's."""
    p_root, p_tr, p_cc, p_nb = _producer_tables(producer, cfg)
    consumer_nontrivial = consumer.opcode not in ("tuple", "parameter") and not is_intermediate(consumer, 3)
    hero = consumer
    if is_intermediate(consumer, 1) and consumer.operands[0] is producer:
        hero = p_root
        while producer.fused is not None and is_intermediate(hero, 1) and _inside(hero.operands[0], producer.fused):
            hero = hero.operands[0]
    for table, test in ((p_tr, lambda n: tiled_transpose(n, cfg) is not None),
                        (p_cc, lambda n: n.opcode == "concatenate")):
        if hero is consumer:
            if test(consumer):
                found = [consumer]
            elif not is_intermediate(consumer, 3):
                found = []
            else:
                found = list(table.get(p_root.uid, ())) if any(op is producer for op in consumer.operands) else []
        else:
            found = list(table.get(hero.uid, ()))
        if len(found) == 1:
            cand = found[0]
            after = False if cand is consumer else (p_nb.get(cand.uid, False) or consumer_nontrivial)
            if not after:
                return [(consumer, cand)]
    return [(consumer, hero if hero.opcode == "reduce" else consumer)]


def find_non_trivial_hero(node: Node, cfg: GpuConfig) -> Node:
    """FindNonTrivialHero: walk up single-operand intermediate ops to the op that shapes the
    kernel; prefer a unique tiled transpose, then a unique concatenate, then a reduce;
    otherwise the instruction itself.  Meant for instructions inside fusion computations;
    an unfused instruction is its own fusion (only itself is inside)."""
    graph = node.graph
    if graph is None or not graph.is_fusion_body:
        return node  # a lone instruction: the fusion it forms holds only itself
    cache = graph_cache(graph)
    key = ("hero", node.uid, cfg.token)
    found = cache.get(key)
    if found is None:
        found = cache[key] = _find_non_trivial_hero(node, cfg)
    return found


def _find_non_trivial_hero(node: Node, cfg: GpuConfig) -> Node:
    graph = node.graph
    hero = node
    while is_intermediate(hero, 1) and _inside(hero.operands[0], graph):
        hero = hero.operands[0]
    if not _has_transpose_or_concat(graph):  # most fusions: no table needed
        return hero if hero.opcode == "reduce" else node
    search = _hero_search(graph, cfg)
    for which in (_TRANSPOSES, _CONCATS):
        # A unique tiled transpose (else a unique concatenate) behind intermediate ops, with
        # nothing non-trivial after it.
        candidates = search.heroes(which, hero, graph)
        if len(candidates) == 1 and not search.nontrivial_below(candidates[0], graph):
            return candidates[0]
    if hero.opcode != "reduce":
        return node
    return hero


_TRANSPOSES = 0
_CONCATS = 1


def _hero_search(graph, cfg: GpuConfig) -> "_HeroSearch":
    cache = graph_cache(graph)
    key = ("hero-search", cfg.token)
    found = cache.get(key)
    if found is None:
        found = cache[key] = _HeroSearch(cfg)
    return found


class _HeroSearch:
    """The entries of `_hero_tables` for one version of a fusion body, each computed when first
    asked: FindNonTrivialHero needs those above one hero and below at most two candidates,
    usually a small part of the body, and the body changes with every fusion step.  The
    answers are the tables' (tests/test_gpu_analyses.py compares them on every instruction).
    Iterative: a body may hold chains longer than Python's recursion limit.  (The graph is
    passed in, not kept: the cache on the graph holds this object.)"""

    def __init__(self, cfg: GpuConfig):
        self.cfg = cfg
        self.intermediate: dict[int, bool] = {}
        self.found: list[dict[int, tuple]] = [{}, {}]
        self.below: dict[int, bool] = {}

    def _intermediate(self, node: Node) -> bool:
        known = self.intermediate.get(node.uid)
        if known is None:
            known = self.intermediate[node.uid] = is_intermediate(node, 3)
        return known

    def _is_hero(self, which: int, node: Node) -> bool:
        if which == _TRANSPOSES:
            return tiled_transpose(node, self.cfg) is not None
        return node.opcode == "concatenate"

    def heroes(self, which: int, start: Node, graph) -> tuple:
        """The (at most two) distinct tiled transposes or concatenates reachable from `start`
        through intermediate ops of the body, as `_hero_tables` lists them."""
        table = self.found[which]
        known = table.get(start.uid)
        if known is not None:
            return known
        if not _inside(start, graph):
            return ()
        stack: list[tuple[Node, bool]] = [(start, False)]
        while stack:
            node, expanded = stack.pop()
            if node.uid in table:
                continue
            if not expanded:
                if self._is_hero(which, node):
                    table[node.uid] = (node,)
                elif not self._intermediate(node):
                    table[node.uid] = ()
                else:
                    stack.append((node, True))
                    for op in node.operands:
                        if _inside(op, graph) and op.uid not in table:
                            stack.append((op, False))
                continue
            acc: list[Node] = []
            for op in node.operands:
                for hero in table[op.uid] if _inside(op, graph) else ():
                    if not any(hero is h for h in acc):
                        acc.append(hero)
                if len(acc) > 1:
                    break
            table[node.uid] = tuple(acc[:2])
        return table[start.uid]

    def nontrivial_below(self, start: Node, graph) -> bool:
        """Whether an instruction of the body after `start` (through users) is non-trivial:
        neither intermediate nor a tuple."""
        below = self.below
        known = below.get(start.uid)
        if known is not None:
            return known
        stack: list[tuple[Node, bool]] = [(start, False)]
        while stack:
            node, expanded = stack.pop()
            if node.uid in below:
                continue
            if not expanded:
                stack.append((node, True))
                for user in node.users:
                    if user.graph is graph and user.uid not in below:
                        stack.append((user, False))
                continue
            answer = False
            for user in node.users:
                if user.graph is graph and (
                        (user.opcode not in ("tuple", "parameter") and not self._intermediate(user))
                        or below[user.uid]):
                    answer = True
                    break
            below[node.uid] = answer
        return below[start.uid]


def _has_transpose_or_concat(graph) -> bool:
    opcodes = body_opcodes(graph)
    return "transpose" in opcodes or "concatenate" in opcodes


def body_opcodes(graph) -> frozenset[str]:
    """The opcodes of a computation's instructions, once per version of it: most questions
    about a fusion's heroes have a known answer when its body holds no reduce or no transpose
    (a hero is an instruction of the body)."""
    cache = graph_cache(graph)
    found = cache.get("opcodes")
    if found is None:
        found = cache["opcodes"] = frozenset([n.opcode for n in graph.nodes()])
    return found


def real_hero(node: Node, cfg: GpuConfig) -> Node:
    """GetRealHeroForMultiOutputFusion: the instruction itself if unfused; for a fusion, the
    hero of the (first) root that is a real reduction hero or a tiled transpose, else the
    (first) root."""
    if node.opcode != "fusion":
        return node
    body = node.fused
    cache = graph_cache(body)
    key = ("real hero", cfg.token, body.root.uid)
    found = cache.get(key)
    if found is None:  # (remembered per version of the body and root: every rule pair of the passes asks)
        found = cache[key] = _real_hero(node, cfg)
    return found


def _real_hero(node: Node, cfg: GpuConfig) -> Node:
    root = node.fused.root
    if not is_multi_output_fusion(node):
        hero = find_non_trivial_hero(root, cfg)
        if is_real_reduction_hero(root, hero, cfg) or tiled_transpose(hero, cfg) is not None:
            return hero
        return root
    for inst in root.operands:
        hero = find_non_trivial_hero(inst, cfg)
        if is_real_reduction_hero(inst, hero, cfg) or tiled_transpose(hero, cfg) is not None:
            return hero
    return root.operands[0]


def heroes_incompatibility(hero1: Node, hero2: Node, cfg: GpuConfig) -> str | None:
    """FusionHeroesAreCompatible: None, or XLA's reason why one kernel cannot be emitted
    around both heroes."""
    reduce1, reduce2 = is_contiguous_reduction(hero1, cfg), is_contiguous_reduction(hero2, cfg)
    tr1, tr2 = tiled_transpose(hero1, cfg), tiled_transpose(hero2, cfg)
    if reduce1 and reduce2 and not reductions_mof_compatible(hero2, hero1):
        return "tiled reductions with different shapes"
    if tr1 is not None and tr2 is not None and not tr1.is_equivalent(tr2, era_2026=not cfg.legacy):
        return "tiled transposes with different shapes"
    if not cfg.legacy:
        nested1 = hero1.opcode == "transpose" and tr1 is None
        nested2 = hero2.opcode == "transpose" and tr2 is None
        if ((tr1 is not None or reduce1) and nested2) or ((tr2 is not None or reduce2) and nested1):
            return "multi-output fusion of a nested transpose with an unnested hero op"
    if (tr1 is not None and reduce2) or (reduce1 and tr2 is not None):
        return "MOF-fusion of a transpose and a reduction" if cfg.legacy \
            else "multi-output fusion of a transpose and a reduction"
    if tr1 is not None or tr2 is not None:
        fusion1 = hero1.graph.fusion_owner if hero1.graph is not None else None
        fusion2 = hero2.graph.fusion_owner if hero2.graph is not None else None
        if fusion1 is not None and fusion2 is not None:
            if tr1 is not None and fusion1 in fusion2.operands:
                param = fusion2.fused_parameter(fusion2.operand_index(fusion1))
                if not _path_of_intermediate_ops(param):
                    return "tiled transpose would become untiled"
            elif tr2 is not None and fusion2 in fusion1.operands:
                param = fusion1.fused_parameter(fusion1.operand_index(fusion2))
                if not _path_of_intermediate_ops(param):
                    return "tiled transpose would become untiled"
    return None


def _path_of_intermediate_ops(param: Node) -> bool:
    """The parameter has one user and the chain from it to the root is intermediate ops."""
    if len(param.users) != 1:
        return False
    node = param.users[0]
    while node.users:
        if not is_intermediate(node, 1):
            return False
        node = node.users[0]
    return True


def loop_shape(hero: Node, cfg: GpuConfig):
    """The shape a multi-output fusion around `hero` iterates over: a contiguous reduction's
    or tiled transpose's input shape, else the hero's own shape."""
    h = find_non_trivial_hero(hero, cfg) if hero.graph is not None and hero.graph.is_fusion_body else hero
    if is_contiguous_reduction(hero, cfg) or tiled_transpose(h, cfg) is not None:
        return h.operands[0].shape
    return hero.shape


def shapes_incompatibility(a: Node, b: Node, cfg: GpuConfig) -> str | None:
    """ShapesCompatibleForMultiOutputFusion: None, or why `a` and `b` cannot share one
    parallel loop (their heroes clash, or their loop shapes differ beyond a bitcast)."""
    hero1, hero2 = real_hero(a, cfg), real_hero(b, cfg)
    reason = heroes_incompatibility(hero1, hero2, cfg)
    if reason is not None:
        return reason
    l1, l2 = loop_shape(hero1, cfg), loop_shape(hero2, cfg)
    accept_unequal = not l1.is_tuple and not l2.is_tuple
    if not equal_ignoring_element_type(l1, l2) and (
            not accept_unequal or not is_reshape_or_transpose_bitcast(l1, l2, ignore_element_type=True)):
        return "different loop shapes"
    return None
