"""Tests for lib/hardware.py: the profiles load, carry their sources, and describe their topology."""

import json

import pytest

from lib import hardware as hw

REQUIRED = ("4xT4-pcie", "4xA100-nvlink", "8xH100-nvlink", "1xH200", "cpu")


def test_required_profiles_exist_and_load():
    names = hw.names()
    for n in REQUIRED:
        assert n in names
        p = hw.load(n)
        assert p.name == n
        assert p.n_devices == len(p.devices) >= 1


@pytest.mark.parametrize("name", REQUIRED)
def test_every_figure_has_a_source(name):
    p = hw.load(name)
    keys = set(p.sources)
    dev = p.devices[0]
    for figure in ("peak_flops", "mem_bw_bytes_per_s", "mem_bytes", "usable_mem_bytes", "flops_efficiency",
                   "mem_bw_efficiency", "launch_overhead_s"):
        assert any(k.startswith(f"device.{figure}") for k in keys), f"{name}: no source for {figure}"
    if p.n_devices > 1:
        for figure in ("peak_bw_bytes_per_s", "kind", "latency_s"):
            assert f"topology.{figure}" in keys, f"{name}: no source for topology.{figure}"
    assert dev.usable_mem_bytes <= dev.mem_bytes
    assert "host_launch_s" in keys
    for c in p.calibration.values():  # every calibration constant says why
        assert "reason" in c and len(c["reason"]) > 10


@pytest.mark.parametrize("name", REQUIRED)
def test_calibration_values_match_the_fields(name):
    p = hw.load(name)
    from lib.placement import memory
    from lib.placement.sim_mechanisms import Mechanisms

    for key, c in p.calibration.items():
        where, attr = key.split(".", 1)
        assert where in ("device", "topology", "memory", "mechanisms"), key
        if where == "mechanisms":  # a fitted hypothesis: recorded, and off unless a chapter switches it on
            assert "hypothesis" in c["status"] and c["fitted_to"], key
            assert getattr(Mechanisms(), attr) == 0, key
            continue
        if where == "memory":
            actual = getattr(memory, attr.upper())
        else:
            actual = getattr(p.devices[0], attr) if where == "device" else p.topology[attr]
        assert actual == pytest.approx(c["value"]), key


def test_t4_datasheet_figures():
    p = hw.load("4xT4-pcie")
    t4 = p.devices[0]
    assert p.n_devices == 4
    assert t4.peak_flops["fp32"] == 8.1e12 and t4.peak_flops["fp16"] == 65e12
    assert t4.mem_bw_bytes_per_s == 320e9
    assert t4.mem_bytes == 16 * 2**30
    assert t4.usable_mem_bytes == int(14.75 * 2**30)
    # PCIe Gen3 x16: 8 GT/s x 16 lanes x 128/130 / 8 bits
    assert p.topology["peak_bw_bytes_per_s"] == pytest.approx(8e9 * 16 * 128 / 130 / 8, rel=1e-3)
    assert "calibrated" in p.calibration["device.flops_efficiency"]["reason"]


def test_datacenter_datasheet_figures():
    a100, h100, h200 = (hw.load(n).devices[0] for n in ("4xA100-nvlink", "8xH100-nvlink", "1xH200"))
    assert a100.peak_flops["fp32"] == 19.5e12 and a100.peak_flops["bf16"] == 312e12
    assert a100.mem_bw_bytes_per_s == 2039e9
    assert h100.peak_flops["fp32"] == 67e12 and h100.mem_bw_bytes_per_s == 3.35e12
    assert h200.mem_bw_bytes_per_s == 4.8e12 and h200.mem_bytes == 141 * 2**30
    assert hw.load("8xH100-nvlink").n_devices == 8


def test_unknown_profile_lists_known_names():
    with pytest.raises(ValueError, match="4xT4-pcie"):
        hw.load("4xT4")


def test_round_trip_through_json():
    for n in REQUIRED:
        p = hw.load(n)
        q = hw.HardwareProfile.from_dict(json.loads(json.dumps(p.to_dict())))
        assert q == p


def test_link_channels_describe_contention():
    pcie, a100, h100 = hw.load("4xT4-pcie"), hw.load("4xA100-nvlink"), hw.load("8xH100-nvlink")
    assert pcie.link(0, 1).channels == pcie.link(2, 3).channels == ("bus",)  # one shared host bridge
    assert set(a100.link(0, 1).channels).isdisjoint(a100.link(2, 3).channels)
    assert set(a100.link(0, 1).channels).isdisjoint(a100.link(1, 0).channels)  # each direction its own
    assert set(h100.link(0, 1).channels) & set(h100.link(0, 2).channels) == {"out0"}  # same sender port
    assert set(h100.link(0, 1).channels).isdisjoint(h100.link(2, 3).channels)
    ln = pcie.link(0, 1)
    assert ln.bw_bytes_per_s == pytest.approx(ln.peak_bw_bytes_per_s * ln.efficiency)
    assert ln.copy_s(1e9) == pytest.approx(ln.latency_s + 1e9 / ln.bw_bytes_per_s)


def test_bad_links_and_devices():
    p = hw.load("4xT4-pcie")
    with pytest.raises(ValueError, match="itself"):
        p.link(1, 1)
    with pytest.raises(ValueError, match="out of range"):
        p.link(0, 4)
    with pytest.raises(ValueError):
        hw.load("1xH200").link(0, 1)
    good = p.devices[0].to_dict()
    for field, bad in (("flops_efficiency", 0.0), ("flops_efficiency", 1.5), ("mem_bw_bytes_per_s", -1),
                       ("usable_mem_bytes", 10**15)):
        with pytest.raises(ValueError, match=field.split("_")[0]):
            hw.Device.from_dict({**good, field: bad})
    with pytest.raises(ValueError, match="no 'int8'"):
        p.devices[0].achievable_flops("int8")


def test_replace_makes_a_what_if_profile():
    p = hw.load("4xT4-pcie")
    fast = p.replace(topology={**p.topology, "efficiency": 1.0})
    assert fast.link(0, 1).bw_bytes_per_s > p.link(0, 1).bw_bytes_per_s
    assert p.topology["efficiency"] == 0.4  # the original is untouched (frozen)
    with pytest.raises(ValueError, match="kind"):
        p.replace(topology={"kind": "ring"})


def test_cluster_profile_loads_with_every_figure_sourced():
    assert "h100-cluster" in hw.cluster_names()
    c = hw.load_cluster("h100-cluster", 2048)
    assert c.n_gpus == 16_384 and c.gpus_per_node == 8 and c.node == hw.load("8xH100-nvlink")
    for figure in ("node", "max_nodes", "fabric.peak_bw_bytes_per_s", "fabric.latency_s", "fabric.efficiency",
                   "storage_bw_bytes_per_s"):
        assert len(c.sources.get(figure, "")) > 10, figure
    for key, cal in c.calibration.items():
        assert c.fabric[key.split(".", 1)[1]] == pytest.approx(cal["value"]) and len(cal["reason"]) > 10
    assert c.fabric["peak_bw_bytes_per_s"] == 400e9 / 8   # 400 Gb/s per GPU, one direction
    assert "h100-cluster" not in hw.names()               # not a single-machine profile


def test_cluster_links_inside_and_across_nodes():
    c = hw.load_cluster("h100-cluster", 4)
    inside, across = c.link(0, 7), c.link(7, 8)
    assert inside.peak_bw_bytes_per_s == c.node.link(0, 7).peak_bw_bytes_per_s == 450e9
    assert across.peak_bw_bytes_per_s == c.fabric["peak_bw_bytes_per_s"]
    assert across.latency_s == c.fabric["latency_s"]
    assert c.link(9, 10).channels != c.link(1, 2).channels  # node 1's NVSwitch ports are its own
    assert set(c.link(0, 8).channels) & set(c.link(0, 16).channels) == {"nic0:out"}
    assert c.with_nodes(2).n_gpus == 16


def test_cluster_bad_sizes_and_names():
    with pytest.raises(ValueError, match="n_nodes must be in 1..2048"):
        hw.load_cluster("h100-cluster", 4096)
    with pytest.raises(ValueError, match="n_nodes must be an integer"):
        hw.load_cluster("h100-cluster", 0)
    with pytest.raises(ValueError, match="unknown cluster profile"):
        hw.load_cluster("a100-cluster")
    with pytest.raises(ValueError, match="out of range"):
        hw.load_cluster("h100-cluster", 1).link(0, 8)
    c = hw.load_cluster("h100-cluster", 2)
    with pytest.raises(ValueError, match="fabric.efficiency"):
        hw.MultiNodeProfile(c.name, c.node, 2, 4, {**c.fabric, "efficiency": 1.5}, 1e12)
