"""lib.placement.env: the placement contract (validation, the OOM charge, JSON round trip)."""

import numpy as np
import pytest

from lib.placement.env import OOM_PENALTY_S, Measurement, PlacementEnv, check_mem_cap, validate_placement


def test_validate_placement_accepts_and_normalises():
    assert validate_placement([0, 1, 3, 2], 4, 4) == (0, 1, 3, 2)
    import numpy as np

    assert validate_placement(np.array([1, 1]), 2, 2) == (1, 1)


def test_wrong_length_names_both_lengths():
    with pytest.raises(ValueError, match=r"3 entries; this model has 4 nodes"):
        validate_placement([0, 0, 0], 4, 2)


def test_device_out_of_range_names_the_range():
    with pytest.raises(ValueError, match=r"placement\[2\] = 4 is out of range: devices are 0\.\.3"):
        validate_placement([0, 1, 4, -1], 4, 4)
    with pytest.raises(ValueError, match="out of range"):
        validate_placement([-1], 1, 4)


def test_not_a_sequence_of_ints():
    with pytest.raises(ValueError, match="sequence of device indices"):
        validate_placement(["a", "b"], 2, 2)
    with pytest.raises(ValueError, match=r"placement\[1\] = 1.9 is not an integer"):
        validate_placement([0, 1.9, 1], 3, 4)  # int() would have truncated it to 1
    with pytest.raises(ValueError, match=r"placement\[2\] = True is not an integer"):
        validate_placement([0, 1, True], 3, 4)
    assert validate_placement(np.array([0, 3, 1]), 3, 4) == (0, 3, 1)  # numpy integers are integers
    assert validate_placement([0, 2.0], 2, 4) == (0, 2)                  # and so is 2.0


def test_mem_cap_must_be_a_fraction():
    assert check_mem_cap(None) is None and check_mem_cap(1) == 1.0 and check_mem_cap(0.24) == 0.24
    for bad in (True, 0, -0.5, 1.01, "0.5"):
        with pytest.raises(ValueError, match=r"outside \(0, 1\]"):
            check_mem_cap(bad)


def test_out_of_memory_is_charged_the_penalty():
    m = Measurement.out_of_memory(4, source="simulated: test")
    assert m.oom and m.step_s == OOM_PENALTY_S == 10.0
    assert m.peak_mem_bytes == (0, 0, 0, 0)


def test_measurement_round_trips_through_json():
    import json

    m = Measurement(0.23, False, (1, 2), {"forward": 0.1}, "measured on cpu", (0.22, 0.23))
    assert Measurement.from_dict(json.loads(json.dumps(m.to_dict()))) == m


def test_protocol_is_checkable():
    class Dummy:
        n_nodes, n_devices = 2, 2

        def measure(self, placement):
            return Measurement(1.0, False, (0, 0))

        def describe(self):
            return "dummy"

    assert isinstance(Dummy(), PlacementEnv)
    assert not isinstance(object(), PlacementEnv)
