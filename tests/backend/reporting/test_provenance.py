"""What ran a number, from the environment a result stores."""

from __future__ import annotations

from backend.reporting.provenance import hardware, ran_on, software, what_ran

LOCAL = {
    "hostname": "vm",
    "python": "3.11.7",
    "cpu": "AMD EPYC",
    "cpu_count_logical": 2,
    "gpus": [{"name": "NVIDIA H200"}],
    "backend": "onnxruntime",
    "backend_version": "1.32.0",
    "runtime_env": "default",
}


def test_a_local_cpu_result_names_its_runtime_cpu_and_host() -> None:
    assert software(LOCAL) == "onnxruntime 1.32.0 (default env), Python 3.11.7"
    assert hardware(LOCAL, "cpu") == "AMD EPYC, 2 logical cores"
    assert hardware(LOCAL, "cuda") == "NVIDIA H200"
    assert ran_on(LOCAL) == "vm"


def test_a_cluster_result_names_its_node_and_a_never_run_one_nothing() -> None:
    where = LOCAL | {
        "cluster": {"target": "gpu", "hostname": "n1", "node_id": "abcdef123456", "gpu_ids": ["0"]}
    }
    assert ran_on(where) == "gpu · n1 · node abcdef12 · GPU 0"
    assert software({}) == "" and hardware({}) == ""


def test_what_ran_lists_each_distinct_setup_once_in_order() -> None:
    a = (software(LOCAL), hardware(LOCAL), "vm")
    b = ("openvino 2026.4.1 (default env)", "AMD EPYC, 2 logical cores", "vm")
    assert what_ran([a, b, a, ("", "", "")]) == [
        "onnxruntime 1.32.0 (default env), Python 3.11.7 on AMD EPYC, 2 logical cores (host vm)",
        "openvino 2026.4.1 (default env) on AMD EPYC, 2 logical cores (host vm)",
    ]
