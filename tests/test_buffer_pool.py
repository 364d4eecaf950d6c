"""The buffer pool of the fused rollout: reuse, its cap, and buffers kept until their graph is released."""
import gc

import pytest
import torch

from dsident import StateSpaceModel
from dsident.dynamics import PLRNN, ShallowPLRNN
from dsident.inference.buffer_pool import POOL, BufferPool
from dsident.inference.teacher_forcing import teacher_forcing_loss
from dsident.observations import Gaussian


def test_a_given_buffer_is_handed_out_again_and_only_for_its_shape_and_dtype():
    pool = BufferPool()
    buf = pool.take((3, 4), torch.float32, torch.device("cpu"))
    assert buf.shape == (3, 4) and buf.dtype == torch.float32
    pool.give(buf)
    assert pool.held_bytes == 48
    assert pool.take((4, 3), torch.float32, "cpu").data_ptr() != buf.data_ptr()
    assert pool.take((3, 4), torch.float64, "cpu").data_ptr() != buf.data_ptr()
    assert pool.take((3, 4), torch.float32, "cpu").data_ptr() == buf.data_ptr()
    assert pool.held_bytes == 0
    assert pool.take((3, 4), torch.float32, "cpu").data_ptr() != buf.data_ptr()    # handed out once only


def test_views_are_not_pooled_and_the_cap_drops_other_shapes_first():
    pool = BufferPool(max_bytes=1000)
    pool.give(torch.empty(10, 10)[:5])                      # a view: its base may live on elsewhere
    assert pool.held_bytes == 0
    pool.give(torch.empty(100))                             # 400 bytes
    pool.give(torch.empty(100))
    assert pool.held_bytes == 800
    pool.give(torch.empty(50, dtype=torch.float64))         # 400 more would pass the cap: the others go
    assert pool.held_bytes == 400
    pool.give(torch.empty(1000))                            # larger than the cap: not kept
    assert pool.held_bytes == 400
    pool.clear()
    assert pool.held_bytes == 0


def test_give_when_freed_waits_for_the_owner():
    pool = BufferPool()

    class Owner:
        pass

    owner, buf = Owner(), torch.empty(8)
    pool.give_when_freed(owner, buf)
    assert pool.held_bytes == 0
    del owner
    gc.collect()
    assert pool.held_bytes == 32 and pool.take((8,), torch.float32, "cpu").data_ptr() == buf.data_ptr()


def _model(kind):
    if kind == "shallow":
        return StateSpaceModel(ShallowPLRNN(3, 24, clip=True, seed=0), Gaussian(3, 3, readout="identity")).double()
    return StateSpaceModel(PLRNN(5, penalty="none", seed=0), Gaussian(3, 5, readout="linear")).double()


def _grads(model, x):
    model.zero_grad()
    mask = torch.ones_like(x, dtype=torch.bool)
    teacher_forcing_loss(model, x, mask, alpha=0.2)[0].backward()
    return [p.grad.clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize("kind", ["shallow", "plrnn"])
def test_pooled_buffers_neither_leak_between_updates_nor_are_reused_while_a_graph_holds_them(kind):
    model = _model(kind)
    gen = torch.Generator().manual_seed(0)
    x1, x2 = (torch.randn(4, 40, 3, generator=gen, dtype=torch.float64) for _ in range(2))
    POOL.clear()
    first, second = _grads(model, x1), _grads(model, x2)
    # the pool now holds the buffers of those updates; running them again must give the same numbers
    assert POOL.held_bytes > 0
    for _ in range(2):
        for again, ref in zip(_grads(model, x1), first):
            torch.testing.assert_close(again, ref, rtol=0, atol=0)
    # two forward passes before either backward: the first graph's stored states must survive
    model.zero_grad()
    mask = torch.ones_like(x1, dtype=torch.bool)
    loss1, _ = teacher_forcing_loss(model, x1, mask, alpha=0.2)
    loss2, _ = teacher_forcing_loss(model, x2, mask, alpha=0.2)
    (loss1 + loss2).backward()
    both = [p.grad for p in model.parameters() if p.grad is not None]
    for got, a, b in zip(both, first, second):
        torch.testing.assert_close(got, a + b, rtol=1e-12, atol=1e-12)
