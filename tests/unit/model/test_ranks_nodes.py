"""A job across nodes merged (model/ranks.py): ranks[] and per_rank carry their
node; the straggler, the hint, the hover and the CLI name node and rank; the
per-node torchrun command line and environment (harness/nodes/launch.py)."""

from __future__ import annotations

import re

import pytest

from tests.unit.model.test_ranks import _document, _result
from trainium_lens.analysis.findings.analyze import analyze
from trainium_lens.harness.nodes import launch as node_launch
from trainium_lens.lsp.present import rank_format
from trainium_lens.model.ranks import merge_document
from trainium_lens.model.result import Batch, Result

HOSTS = ["node1", "node1", "node2", "node2"]


def _across(results: list[dict]) -> dict:
    return {
        "schema_version": 1,
        "batch_id": "b",
        "world_size": len(results),
        "results": [results[0]],
        "rank_batches": [
            {
                "rank": k,
                "run_dir": f"/runs/b/rank{k}",
                "node": HOSTS[k],
                "node_rank": k // 2,
                "local_rank": k % 2,
                "batch": {"schema_version": 1, "batch_id": "b", "results": [r]},
            }
            for k, r in enumerate(results)
        ],
    }


def _merged() -> Result:
    # rank 3 (node2) computes 40% more on line 10; the others wait for it
    doc = _across(
        [_result(0, 100.0, 140.0), _result(1, 100.0, 140.0), _result(2, 100.0, 140.0), _result(3, 140.0, 0.0)]
    )
    return Batch.from_dict(merge_document(doc)).results[0]


def test_ranks_and_per_rank_carry_their_node():
    res = _merged()
    assert [(r.node, r.node_rank, r.local_rank) for r in res.ranks] == [
        ("node1", 0, 0),
        ("node1", 0, 1),
        ("node2", 1, 0),
        ("node2", 1, 1),
    ]
    mm = res.line("t.py", 10)
    assert mm is not None and [p.node for p in mm.per_rank] == HOSTS
    assert Result.from_dict(res.to_dict()) == res  # the stored form keeps them
    # a one-node job has none of them (optional fields: the schema stays)
    one = Batch.from_dict(merge_document(_document([_result(0, 1.0, 1.0), _result(1, 2.0, 1.0)]))).results[0]
    assert [(r.node, r.node_rank, r.local_rank) for r in one.ranks] == [(None, None, None)] * 2
    assert all(p.node is None for p in one.lines[0].per_rank)


def test_the_straggler_is_named_with_its_node_on_its_line():
    (finding,) = [f for f in analyze(_merged()) if f.kind == "straggler"]
    assert finding.line == 10
    assert finding.message.startswith("node2 / rank 3 is the straggler")
    assert re.search(r"node2 / rank 3: \+40% on this line", finding.message), finding.message
    assert "node1 / rank 0 140 µs" in finding.message


def test_hint_hover_and_cli_name_the_node():
    from trainium_lens.cli.render.ranks import render_ranks

    res = _merged()
    mm = res.line("t.py", 10)
    assert mm is not None
    assert rank_format.hint_spread(mm) == "node2 / rank 3 +40%"
    table = rank_format.hover_table(mm) or ""
    assert "slowest node2 / rank 3" in table and "| node | rank | self |" in table
    assert "| node2 | 3 (slowest) |" in table
    text = render_ranks(res)
    assert re.search(r"node2\s+1\s+1\s+3\s", text), text
    assert "node2 / rank 3 +40%" in text


def test_node_launch_builds_torchrun_arguments_and_env():
    place = {
        "nnodes": 2,
        "node_rank": 1,
        "master_addr": "10.0.0.11",
        "master_port": 24000,
        "rdzv_id": "run-1",
        "local_addr": "10.0.0.12",
        "ifname": "eth1",
        "join_timeout_s": 30,
        "pg_timeout_s": 45,
    }
    assert node_launch.check_nodes(place) is None
    args, env = node_launch.node_launch(place, 4, "/tmp/log", backend="cpu")
    assert "--rdzv-backend=lens-bound" in args and "--rdzv-endpoint=10.0.0.11:24000" in args
    assert "--nnodes=2" in args and "--node-rank=1" in args and "--nproc-per-node=4" in args
    assert "--rdzv-id=run-1" in args and "--local-addr=10.0.0.12" in args
    assert "--rdzv-conf=rank=1,timeout=30" in args
    assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"] == "eth1"
    assert env[node_launch.PG_TIMEOUT_ENV] == "45"
    assert env[node_launch.BIND_ENV] == ""  # only the first node hosts the store
    assert "FI_PROVIDER" not in env  # not a Neuron backend
    first = dict(place, node_rank=0, local_addr="10.0.0.11")
    _args, env0 = node_launch.node_launch(first, 4, "/tmp/log", backend="neuron")
    assert env0[node_launch.BIND_ENV] == "10.0.0.11"
    assert env0["FI_PROVIDER"] == "efa" and env0["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env0["NEURON_RT_ROOT_COMM_ID"] == "10.0.0.11:62182"


@pytest.mark.parametrize(
    "bad, why",
    [
        ({"master_port": 1}, "nnodes"),
        ({"nnodes": 2, "master_port": 70000}, "master_port"),
        ({"nnodes": 2, "master_port": 2000, "node_rank": 2}, "node_rank"),
        ({"nnodes": 2, "master_port": 2000, "ifname": 3}, "ifname"),
    ],
)
def test_bad_nodes_in_a_spec_say_which_field(bad, why):
    assert why in (node_launch.check_nodes(bad) or "")
