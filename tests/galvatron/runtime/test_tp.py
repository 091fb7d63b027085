"""Slice-Gather without processes: simulate every rank of a stage and check that each ends with exactly the
rows its new layout asks for, for every pair of layouts of 2, 4 and 8 ranks (forward and backward)."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.galvatron.runtime.grid import all_layouts, atoms_layout
from lib.galvatron.runtime.tp import plan_transition


def _simulate(src, dst, S, atom=2):
    """Rows each rank would build with plan_transition's groups (all-gather = read the members' pieces)."""
    data = torch.arange(S * atom, dtype=torch.float32)

    def rows(atoms):
        return torch.cat([data[a * atom:(a + 1) * atom] for a in atoms])
    held = {j: rows(src.atoms(j)) for j in range(S)}
    fam = plan_transition(src, dst, S)
    out = {}
    for j in range(S):
        members = fam(j)
        assert j in members
        assert all(fam(k) == members for k in members)  # a partition: every member agrees on its group
        got = []
        for a in dst.atoms(j):
            k = next(k for k in members if a in src.atoms(k))
            i = src.atoms(k).index(a)
            got.append(held[k][i * atom:(i + 1) * atom])
        out[j] = torch.cat(got)
    return rows, out


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([2, 4, 8]), st.data())
def test_every_rank_gets_its_rows(S, data):
    lays = all_layouts(S) + [atoms_layout(S)]
    src, dst = data.draw(st.sampled_from(lays)), data.draw(st.sampled_from(lays))
    rows, out = _simulate(src, dst, S)
    for j in range(S):
        assert torch.equal(out[j], rows(dst.atoms(j)))
    rows, out = _simulate(dst, src, S)  # the backward is the same problem in reverse
    for j in range(S):
        assert torch.equal(out[j], rows(src.atoms(j)))


def test_finer_data_split_is_always_a_local_slice():
    """Spec §2.5 / paper §4: going to fewer TP ranks or more DP ranks only slices (here: to the finest split)."""
    for S in (2, 4, 8):
        for lay in all_layouts(S):
            fam = plan_transition(lay, atoms_layout(S), S)
            assert all(fam(j) == (j,) for j in range(S))
