"""A statistics-mode dump pair shaped like a tensor-parallel LLaMA decoder, written without torch.

Each rank of each step gets the pkl our dumper writes for one training step of a LLaMA-like model
(embedding, per layer RMSNorm, q/k/v/o linears, rotary mul/cat/add, matmul + softmax attention,
SwiGLU MLP, residual adds; final norm, lm head, cross entropy) split over the ranks Megatron-style:
q/k/v and gate/up are column-parallel, o and down row-parallel and followed by a
``Distributed_all_reduce``, the embedding is vocab-parallel. Entries are named as our dumper names
them (forward ``..._forward_input.N``/``output``, backward ``..._backward_input.N`` for the gradients
flowing in and ``..._backward_output.N`` for those an op produces, in autograd order), with stack
lines and the module sidecar (``model.layers.17.mlp``). Statistics only: no npy.

The numbers are simulated, not computed: every tensor has bench statistics per rank and a relative
departure per rank that the NPU side carries, and gradients flow backwards through the recorded
calls as autograd would send them (accumulated where a tensor has several consumers, all-reduced
over the ranks at the inputs of column-parallel linears, passed through the forward collectives).
Everything departs by rounding noise only, except the planted fault: on one rank in one step, one
layer's ``Functional_silu`` backward produces a gradient that is off by :data:`FAULT` (relative); it
spreads to the rest of that rank's backward and, through the tensor-parallel all-reduce, to the
other ranks at a fraction of the size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.modules import ModuleChain
from ptdbg_tui.formats.naming import BACKWARD, FORWARD, INPUT, OUTPUT, entry_name, stack_name
from ptdbg_tui.formats.records import Frame
from ptdbg_tui.formats.stats import NAN_SENTINEL
from ptdbg_tui.formats.writer import RankWriter

BF16 = "torch.bfloat16"
#: The planted fault: the relative error of the faulty silu backward's gradient.
FAULT = 0.3
#: Rounding noise of the mean and l2norm (relative), and how often a max/min moves by one bf16 ulp.
NOISE = 1e-4
ULP_FLIP = 0.05
SOURCE = "/home/user/llama/modeling_llama.py"
TRAIN = "/home/user/llama/train.py"


@dataclass(frozen=True)
class Shape:
    """The model and the job: LLaMA-7B-like at micro-batch 1."""

    layers: int = 32
    ranks: int = 8
    steps: int = 2
    hidden: int = 4096
    heads: int = 32
    ffn: int = 11008
    seq: int = 4096
    vocab: int = 32000
    batch: int = 1

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True)
class Fault:
    """Where the planted fault is: the silu backward of ``layer``'s MLP on ``rank`` in ``step``."""

    rank: int
    step: int
    layer: int

    @property
    def module(self) -> str:
        return f"model.layers.{self.layer}.mlp"


@dataclass(eq=False)
class Tensor:
    """A simulated tensor on every rank: its shape, the bench statistics per rank (max, min, mean,
    l2norm) and the NPU side's relative departure per rank."""

    shape: tuple[int, ...]
    stats: np.ndarray  # [ranks, 4]
    dev: np.ndarray  # [ranks]
    grad: bool = True  # requires grad
    dtype: str = BF16
    all_reduced_grad: bool = False  # its gradient is all-reduced over the ranks (column-parallel input)
    grads: list[Tensor] = field(default_factory=list)  # gradient contributions of its consumers

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


Arg = Tensor | int | float | None


@dataclass(eq=False)
class Call:
    """One recorded API call: its name parts, arguments, outputs, modules and call site."""

    api: str
    index: int
    inputs: list[tuple[tuple[int, ...], Arg]]
    outputs: list[tuple[tuple[int, ...], Tensor]]
    chain: ModuleChain
    frames: list[Frame]
    comm: bool = False

    @property
    def key(self) -> str:
        return f"{self.api}_{self.index}"


class Tracer:
    """Records the forward calls of one step and runs their backward, as the dumper would see them."""

    def __init__(self, shape: Shape, rng: np.random.Generator) -> None:
        self.shape = shape
        self.rng = rng
        self.calls: list[Call] = []
        self.backward: list[
            tuple[Call, list[tuple[tuple[int, ...], Tensor]], list[tuple[tuple[int, ...], Tensor]]]
        ] = []
        self._counters: dict[str, int] = {}
        self.modules: list[tuple[str, str]] = []
        self.sites: list[Frame] = [
            [TRAIN, "318", "<module>", "main()"],
            [TRAIN, "297", "main", "loss = train_step(model, batch, optimizer)"],
            [TRAIN, "212", "train_step", "loss = model(batch.ids, batch.labels)"],
        ]

    # --- tensors ---------------------------------------------------------------------------

    def tensor(
        self,
        shape: Sequence[int],
        scale: float = 1.0,
        grad: bool = True,
        shared: bool = False,
        positive: bool = False,
    ) -> Tensor:
        """A fresh tensor with plausible bench statistics (the same on every rank when ``shared``)."""
        ranks = 1 if shared else self.shape.ranks
        rng = self.rng
        numel = math.prod(shape)
        top = scale * rng.uniform(3.0, 6.0, ranks)
        low = np.zeros(ranks) if positive else -scale * rng.uniform(3.0, 6.0, ranks)
        mean = scale * (rng.uniform(0.2, 0.5, ranks) if positive else rng.normal(0.0, 0.02, ranks))
        norm = scale * math.sqrt(numel) * rng.uniform(0.8, 1.2, ranks)
        stats = _bf16(np.stack([top, low, mean, norm], axis=1))
        if shared:
            stats = np.repeat(stats, self.shape.ranks, axis=0)
        return Tensor(tuple(shape), stats, np.zeros(self.shape.ranks), grad)

    def token_ids(self, shape: Sequence[int]) -> Tensor:
        """Token ids, the same on every rank (int64: max, min, mean and no l2norm)."""
        vocab = self.shape.vocab
        row = [vocab - 1 - int(self.rng.integers(0, 50)), int(self.rng.integers(0, 50)), vocab / 2, math.nan]
        return Tensor(
            tuple(shape),
            np.tile(row, (self.shape.ranks, 1)),
            np.zeros(self.shape.ranks),
            grad=False,
            dtype="torch.int64",
        )

    def constant(self, shape: Sequence[int], top: float, low: float) -> Tensor:
        """A tensor needing no gradient, the same on every rank (rotary tables, the causal mask)."""
        t = self.tensor(shape, shared=True, grad=False)
        t.stats[:, :2] = top, low
        if not math.isfinite(t.stats[0, 3] * low):  # a mask: its l2norm overflows, as on the device
            t.stats[:, 2:] = low / 2, math.inf
        return t

    def like(
        self, t: Tensor, shape: Sequence[int] | None = None, scale: float = 1.0, positive: bool = False
    ) -> Tensor:
        """An op's output computed from ``t``: fresh statistics, ``t``'s departure."""
        out = self.tensor(t.shape if shape is None else shape, scale, positive=positive)
        out.dev = t.dev.copy()
        return out

    # --- recording -------------------------------------------------------------------------

    def call(
        self,
        api: str,
        inputs: Sequence[Arg],
        outputs: Sequence[Tensor],
        line: int,
        source: str,
        comm: bool = False,
        nested_first: bool = False,
    ) -> Tensor:
        """Record a forward call; ``nested_first``: the first argument is a list (``Torch_cat``)."""
        index = self._counters.get(api, 0)
        self._counters[api] = index + 1
        args: list[tuple[tuple[int, ...], Arg]] = []
        for k, value in enumerate(inputs):
            path = (0, k) if nested_first and isinstance(value, Tensor) and k < 2 else (k,)
            if nested_first and k >= 2:
                path = (k - 1,)
            args.append((path, value))
        outs = [((0,), outputs[0])] if len(outputs) == 1 else [((k,), t) for k, t in enumerate(outputs)]
        chain = tuple(self.modules)
        frames = [[SOURCE, str(line), "forward", source], *self._module_sites(), *reversed(self.sites)]
        call = Call(api, index, args, outs, chain, frames, comm)
        self.calls.append(call)
        return outputs[0]

    def _module_sites(self) -> list[Frame]:
        """Where each enclosing module was called, innermost first."""
        out = []
        for depth, (name, cls) in enumerate(reversed(self.modules)):
            line = 300 + 40 * len(self.modules) - 10 * depth
            attr = name.rsplit(".", 1)[-1]
            call = "decoder_layer" if attr.isdigit() else f"self.{attr}"
            out.append([SOURCE, str(line), "forward", f"hidden_states = {call}(hidden_states)  # {cls}"])
        return out

    def inside(self, name: str, cls: str) -> _Scope:
        return _Scope(self, name, cls)

    # --- backward --------------------------------------------------------------------------

    def run_backward(self, loss: Tensor, fault: Fault | None, step: int) -> None:
        """Gradients in autograd order (the reverse of the forward calls): each call's incoming
        gradients, then those it produces for its inputs."""
        loss.grads.append(
            Tensor(
                (), np.tile([[1.0, 1.0, 1.0, math.nan]], (self.shape.ranks, 1)), np.zeros(self.shape.ranks)
            )
        )
        for call in reversed(self.calls):
            if call.comm:  # a forward collective passes the gradient through to its input
                for (_, out), (_, arg) in zip(call.outputs, call.inputs, strict=False):
                    if isinstance(arg, Tensor) and arg.grad:
                        arg.grads.extend(out.grads)
                continue
            incoming = [(p, g) for p, t in call.outputs if (g := self._gradient(t)) is not None]
            if not incoming:
                continue
            dev = np.max([g.dev for _, g in incoming], axis=0)
            produced = []
            for path, arg in call.inputs:
                if not (isinstance(arg, Tensor) and arg.grad):
                    continue
                g = self.like(arg, scale=_grad_scale(arg))
                g.dev = dev.copy()
                if (
                    fault is not None
                    and fault.step == step
                    and call.api == "Functional_silu"
                    and any(name == fault.module for name, _ in call.chain)
                ):
                    g.dev[fault.rank] += FAULT
                arg.grads.append(g)
                produced.append((path, g))
            self.backward.append((call, incoming, produced))

    def _gradient(self, t: Tensor) -> Tensor | None:
        """The gradient flowing into ``t``: its one consumer's, or their sum (all-reduced over the
        ranks for a column-parallel linear's input)."""
        if not t.grads:
            return None
        if len(t.grads) == 1 and not t.all_reduced_grad:
            return t.grads[0]
        total = self.like(t, scale=_grad_scale(t))
        total.dev = np.mean([g.dev for g in t.grads], axis=0)
        if t.all_reduced_grad:
            total.stats[:] = total.stats[0]
            total.dev[:] = total.dev.mean()
        t.grads = [total]
        return total


class _Scope:
    def __init__(self, tracer: Tracer, name: str, cls: str) -> None:
        self.tracer, self.name, self.cls = tracer, name, cls

    def __enter__(self) -> None:
        parent = self.tracer.modules[-1][0] if self.tracer.modules else ""
        self.tracer.modules.append((f"{parent}.{self.name}" if parent else self.name, self.cls))

    def __exit__(self, *exc: object) -> None:
        self.tracer.modules.pop()


def _grad_scale(t: Tensor) -> float:
    return 1e-4 if len(t.shape) != 2 else 1e-3


def _bf16(values: np.ndarray) -> np.ndarray:
    """Round to bf16's 8 significant bits (max and min are elements of a bf16 tensor)."""
    mantissa, exponent = np.frexp(values)
    return np.ldexp(np.round(mantissa * 256) / 256, exponent)


# --- the model ------------------------------------------------------------------------------


def rms_norm(tr: Tracer, x: Tensor, name: str, weight: Tensor) -> Tensor:
    with tr.inside(name, "LlamaRMSNorm"):
        sq = tr.call(
            "Tensor_pow",
            [x, 2],
            [tr.like(x, positive=True)],
            74,
            "variance = hidden_states.pow(2).mean(-1, keepdim=True)",
        )
        var = tr.call(
            "Tensor_mean",
            [sq, -1],
            [tr.like(sq, (*x.shape[:-1], 1), positive=True)],
            74,
            "variance = hidden_states.pow(2).mean(-1, keepdim=True)",
        )
        var_eps = tr.call(
            "Tensor___add__",
            [var, 1e-6],
            [tr.like(var, positive=True)],
            75,
            "hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)",
        )
        inv = tr.call(
            "Torch_rsqrt",
            [var_eps],
            [tr.like(var_eps, positive=True)],
            75,
            "hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)",
        )
        normed = tr.call(
            "Tensor___mul__",
            [x, inv],
            [tr.like(x)],
            75,
            "hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)",
        )
        return tr.call(
            "Tensor___mul__", [weight, normed], [tr.like(normed)], 76, "return self.weight * hidden_states"
        )


def linear(
    tr: Tracer, x: Tensor, name: str, weight: Tensor, out_features: int, row_parallel: bool = False
) -> Tensor:
    with tr.inside(name, "RowParallelLinear" if row_parallel else "ColumnParallelLinear"):
        if not row_parallel:
            x.all_reduced_grad = tr.shape.ranks > 1  # Megatron: the input's gradient is all-reduced
        out = tr.call(
            "Functional_linear",
            [x, weight],
            [tr.like(x, (*x.shape[:-1], out_features))],
            98,
            "output = F.linear(input_, self.weight)",
        )
        if row_parallel:
            total = tr.like(out)
            total.dev[:] = out.dev.mean()
            total.stats[:] = total.stats[0]
            out = tr.call(
                "Distributed_all_reduce",
                [out],
                [total],
                101,
                "torch.distributed.all_reduce(output, group=self.tp_group)",
                comm=True,
            )
    return out


def rotary(tr: Tracer, x: Tensor, cos: Tensor, sin: Tensor, which: str) -> Tensor:
    src = f"{which}_embed = ({which} * cos) + (rotate_half({which}) * sin)"
    a = tr.call("Tensor___mul__", [x, cos], [tr.like(x)], 132, src)
    half = (*x.shape[:-1], x.shape[-1] // 2)
    x1 = tr.call("Tensor___getitem__", [x], [tr.like(x, half)], 121, "x1 = x[..., : x.shape[-1] // 2]")
    x2 = tr.call("Tensor___getitem__", [x], [tr.like(x, half)], 122, "x2 = x[..., x.shape[-1] // 2 :]")
    neg = tr.call("Tensor___neg__", [x2], [tr.like(x2)], 123, "return torch.cat((-x2, x1), dim=-1)")
    rot = tr.call(
        "Torch_cat", [neg, x1], [tr.like(x)], 123, "return torch.cat((-x2, x1), dim=-1)", nested_first=True
    )
    b = tr.call("Tensor___mul__", [rot, sin], [tr.like(x)], 132, src)
    return tr.call("Tensor___add__", [a, b], [tr.like(x)], 132, src)


def attention(
    tr: Tracer, x: Tensor, params: dict[str, Tensor], cos: Tensor, sin: Tensor, mask: Tensor
) -> Tensor:
    s = tr.shape
    heads = s.heads // s.ranks
    local = heads * s.head_dim
    with tr.inside("self_attn", "LlamaAttention"):
        qkv = []
        for which in ("q", "k", "v"):
            y = linear(tr, x, f"{which}_proj", params[which], local)
            src = f"{which} = self.{which}_proj(hidden_states).view(bsz, q_len, -1, dim).transpose(1, 2)"
            y = tr.call(
                "Tensor_view",
                [y, s.batch, s.seq, heads, s.head_dim],
                [tr.like(y, (s.batch, s.seq, heads, s.head_dim))],
                160,
                src,
            )
            y = tr.call(
                "Tensor_transpose", [y, 1, 2], [tr.like(y, (s.batch, heads, s.seq, s.head_dim))], 160, src
            )
            qkv.append(y)
        q, k, v = qkv
        q = rotary(tr, q, cos, sin, "q")
        k = rotary(tr, k, cos, sin, "k")
        src = "attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(dim)"
        kt = tr.call(
            "Tensor_transpose", [k, 2, 3], [tr.like(k, (s.batch, heads, s.head_dim, s.seq))], 171, src
        )
        scores = (s.batch, heads, s.seq, s.seq)
        w = tr.call("Torch_matmul", [q, kt], [tr.like(q, scores, scale=8.0)], 171, src)
        w = tr.call("Tensor___truediv__", [w, math.sqrt(s.head_dim)], [tr.like(w, scale=0.7)], 171, src)
        w = tr.call(
            "Tensor___add__",
            [w, mask],
            [tr.like(w, scale=0.7)],
            174,
            "attn_weights = attn_weights + causal_mask",
        )
        p = tr.call(
            "Functional_softmax",
            [w, -1],
            [tr.like(w, scale=0.2, positive=True)],
            176,
            "attn_weights = nn.functional.softmax(attn_weights, -1)",
        )
        o = tr.call(
            "Torch_matmul",
            [p, v],
            [tr.like(v)],
            177,
            "attn_output = torch.matmul(attn_weights, value_states)",
        )
        o = tr.call(
            "Tensor_transpose",
            [o, 1, 2],
            [tr.like(o, (s.batch, s.seq, heads, s.head_dim))],
            179,
            "attn_output = attn_output.transpose(1, 2).contiguous()",
        )
        o = tr.call(
            "Tensor_reshape",
            [o, s.batch, s.seq, local],
            [tr.like(o, (s.batch, s.seq, local))],
            180,
            "attn_output = attn_output.reshape(bsz, q_len, -1)",
        )
        return linear(tr, o, "o_proj", params["o"], s.hidden, row_parallel=True)


def mlp(tr: Tracer, x: Tensor, params: dict[str, Tensor]) -> Tensor:
    local = tr.shape.ffn // tr.shape.ranks
    with tr.inside("mlp", "LlamaMLP"):
        gate = linear(tr, x, "gate_proj", params["gate"], local)
        src = "down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))"
        act = tr.call("Functional_silu", [gate], [tr.like(gate)], 214, src)
        up = linear(tr, x, "up_proj", params["up"], local)
        both = tr.call("Tensor___mul__", [act, up], [tr.like(up)], 214, src)
        return linear(tr, both, "down_proj", params["down"], tr.shape.hidden, row_parallel=True)


def layer_params(tr: Tracer) -> dict[str, Tensor]:
    s = tr.shape
    local, ffn = s.hidden // s.ranks, s.ffn // s.ranks
    shapes = {
        "in_norm": (s.hidden,),
        "post_norm": (s.hidden,),
        "q": (local, s.hidden),
        "k": (local, s.hidden),
        "v": (local, s.hidden),
        "o": (s.hidden, local),
        "gate": (ffn, s.hidden),
        "up": (ffn, s.hidden),
        "down": (s.hidden, ffn),
    }
    return {
        name: tr.tensor(shape, scale=0.02 if len(shape) == 2 else 0.3, shared=len(shape) == 1)
        for name, shape in shapes.items()
    }


def decoder_layer(
    tr: Tracer, x: Tensor, i: int, params: dict[str, Tensor], rope: tuple[Tensor, Tensor], mask: Tensor
) -> Tensor:
    with tr.inside(f"layers.{i}", "LlamaDecoderLayer"):
        h = rms_norm(tr, x, "input_layernorm", params["in_norm"])
        h = attention(tr, h, params, *rope, mask)
        x = tr.call("Tensor___add__", [x, h], [tr.like(x)], 250, "hidden_states = residual + hidden_states")
        h = rms_norm(tr, x, "post_attention_layernorm", params["post_norm"])
        h = mlp(tr, h, params)
        return tr.call(
            "Tensor___add__", [x, h], [tr.like(x)], 256, "hidden_states = residual + hidden_states"
        )


def training_step(tr: Tracer, fault: Fault | None, step: int) -> None:
    """One step's forward and backward calls."""
    s = tr.shape
    ids, labels = tr.token_ids((s.batch, s.seq)), tr.token_ids((s.batch * s.seq,))
    cos, sin = tr.constant((s.seq, s.head_dim), 1.0, -1.0), tr.constant((s.seq, s.head_dim), 1.0, -1.0)
    mask = tr.constant((s.batch, 1, s.seq, s.seq), 0.0, float(np.finfo(np.float32).min))
    with tr.inside("model", "LlamaModel"):
        with tr.inside("embed_tokens", "VocabParallelEmbedding"):
            table = tr.tensor((s.vocab // s.ranks, s.hidden), scale=0.02)
            x = tr.call(
                "Functional_embedding",
                [ids, table],
                [tr.tensor((s.batch, s.seq, s.hidden), 0.005)],
                190,
                "output_parallel = F.embedding(masked_input, self.weight)",
            )
            total = tr.like(x)
            total.stats[:] = total.stats[0]
            x = tr.call(
                "Distributed_all_reduce",
                [x, None],
                [total],
                193,
                "torch.distributed.all_reduce(output_parallel, group=self.tp_group)",
                comm=True,
            )
        for i in range(s.layers):
            x = decoder_layer(tr, x, i, layer_params(tr), (cos, sin), mask)
        x = rms_norm(tr, x, "norm", tr.tensor((s.hidden,), scale=0.3, shared=True))
    with tr.inside("lm_head", "Linear"):
        logits = tr.call(
            "Functional_linear",
            [x, tr.tensor((s.vocab, s.hidden), 0.02, shared=True)],
            [tr.like(x, (s.batch, s.seq, s.vocab), scale=2.0)],
            98,
            "return F.linear(input, self.weight)",
        )
    flat = tr.call(
        "Tensor_view",
        [logits, -1, s.vocab],
        [tr.like(logits, (s.batch * s.seq, s.vocab))],
        288,
        "loss = F.cross_entropy(logits.view(-1, self.vocab_size), labels.view(-1))",
    )
    loss = tr.call(
        "Functional_cross_entropy",
        [flat, labels],
        [tr.like(flat, (), positive=True)],
        288,
        "loss = F.cross_entropy(logits.view(-1, self.vocab_size), labels.view(-1))",
    )
    tr.run_backward(loss, fault, step)


# --- writing --------------------------------------------------------------------------------


def _stats(t: Tensor, rank: int, npu: bool, rng: np.random.Generator) -> list[object]:
    """The statistics the dumper records: the bench's, or the NPU's (departed and rounded)."""
    base = t.stats[rank]
    if not t.grad:  # inputs and constants: the same on both sides
        if t.dtype == "torch.int64":
            return [int(base[0]), int(base[1]), float(base[2]), NAN_SENTINEL]
        return [float(v) for v in base]
    scale = 1 + t.dev[rank] if npu else 1.0
    if not t.shape:
        v = float(base[0] * scale)
        return [v, v, v, NAN_SENTINEL]
    mx, mn, mean, norm = base * scale
    if npu:
        flip = rng.random(2) < ULP_FLIP
        mx += flip[0] * math.ldexp(1.0, math.frexp(mx)[1] - 8)
        mn -= flip[1] * math.ldexp(1.0, math.frexp(mn)[1] - 8)
        mean *= 1 + NOISE * rng.standard_normal()
        norm *= 1 + NOISE * rng.standard_normal()
    return [float(mx), float(mn), float(mean), float(norm)]


class _Recorded:
    """The statistics one side records for each tensor of one rank: a tensor seen twice (an output and
    the next call's input) is recorded twice alike."""

    def __init__(self, rank: int, npu: bool, rng: np.random.Generator) -> None:
        self.rank, self.npu, self.rng = rank, npu, rng
        self._seen: dict[int, list[object]] = {}

    def __call__(self, t: Tensor) -> list[object]:
        stats = self._seen.get(id(t))
        if stats is None:
            stats = self._seen[id(t)] = _stats(t, self.rank, self.npu, self.rng)
        return stats


def _arg_line(value: Arg, recorded: _Recorded) -> tuple[str, object, list[object]]:
    """(dtype, shape, stats) of one argument as the dumper records it."""
    if isinstance(value, Tensor):
        return value.dtype, list(value.shape), recorded(value)
    return str(type(value)), "[]", [value, value, value, value]


def _tensor_entries(
    call: Call, direction: str, kind: str, items: Sequence[tuple[tuple[int, ...], Arg]], recorded: _Recorded
) -> Iterator[tuple[str, str, object, list]]:
    single = direction == FORWARD and kind == OUTPUT and len(items) == 1 and not call.comm
    for path, value in items:
        if value is None:
            continue
        if single:
            path = ()  # a single forward output is ``..._output`` (a collective's are its arguments)
        yield (entry_name(call.api, call.index, direction, kind, path), *_arg_line(value, recorded))


def write_rank(tr: Tracer, root: Path, rank: int, step: int, npu: bool, seed: int) -> int:
    """One side's pkl and module sidecar of one rank in one step; returns the tensor lines written."""
    recorded = _Recorded(rank, npu, np.random.default_rng([seed, step, rank, npu]))
    w = RankWriter(rank_dir_path(root, rank, step), summary_only=True)
    lines = 0
    try:
        for call in tr.calls:
            for kind, items in ((INPUT, call.inputs), (OUTPUT, call.outputs)):
                for name, dtype, shape, stats in _tensor_entries(call, FORWARD, kind, items, recorded):
                    w.write_tensor(name, 0, dtype, shape, stats)
                    lines += 1
            w.write_stack(stack_name(f"{call.key}_{FORWARD}"), call.frames)
            w.write_modules(call.key, call.chain)
        for call, incoming, produced in tr.backward:
            for kind, items in ((INPUT, incoming), (OUTPUT, produced)):
                for name, dtype, shape, stats in _tensor_entries(call, BACKWARD, kind, items, recorded):
                    w.write_tensor(name, 0, dtype, shape, stats)
                    lines += 1
            w.write_stack(stack_name(f"{call.key}_{BACKWARD}"), call.frames)
    finally:
        w.close()
    return lines


def write_pair(root: Path, shape: Shape, fault: Fault | None, seed: int = 0) -> tuple[Path, Path, int]:
    """``root/npu`` and ``root/bench`` with ``shape.steps`` steps of ``shape.ranks`` ranks each;
    returns the two roots and the tensor lines per side."""
    roots = root / "npu", root / "bench"
    lines = 0
    for step in range(shape.steps):
        tr = Tracer(shape, np.random.default_rng([seed, step]))
        training_step(tr, fault, step)
        for rank in range(shape.ranks):
            for side, npu in zip(roots, (True, False), strict=True):
                n = write_rank(tr, side, rank, step, npu, seed)
            lines += n
    return (*roots, lines)
