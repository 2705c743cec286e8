"""The two test tiers, declared in one place: `slow` is every test that needs a real server
(Triton, Ray, PostgreSQL, a browser), a real worker run or several child processes;
`scripts/test --fast` runs the rest (`-m "not slow"`), `scripts/test` runs everything.

A test is slow when it asks for a server fixture, or its module or its own name is listed below
with the reason. A listed name that matches no collected test fails the full run, so a rename
cannot quietly move a slow test into the fast tier. The lists come from `--durations` of a full
run on the 2-core dev host (every listed test took a second or more there).

How the full run spreads them (`scripts/test`): the tests marked `serial` run one at a time, in
two lanes beside the rest, which run on pytest-xdist workers side by side: the `cluster` lane
(the Ray cluster tests, each module with a cluster and a PostgreSQL server of its own) and the
serial lane (every other serial test); then the tests marked `alone` (also serial) run with
nothing else. Serial are the tests that start servers with waits or share host-wide state
(Triton, a Ray cluster of three nodes, a browser driving a Streamlit server, /dev/shm): two of
them at once would race for ports, memory or the same regions, and under a load of three they
still finish. Alone are the ones whose assertions are timings (Triton's predicted against
measured rates, offered against achieved load, an A/A verdict, a sleep's jitter, a spinner that
must own a core) and the check of what the whole run left. Each worker that runs a PostgreSQL
test starts one server for its session (tests/postgres.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

SERVER_FIXTURES = {
    "postgres_server": "a real PostgreSQL server",
    "postgres_url": "a real PostgreSQL server",
    "ray_cluster": "a real local Ray cluster",
    "triton_environment": "a real Triton server",
}

SLOW_MODULES = {
    "tests/test_llm_models.py": "trains the test LLM on first use (about 20 s)",
    "tests/backend/models/test_genai_ingest.py": (
        "the model builder in a sandboxed child, generation"
    ),
    "tests/backend/models/test_hfconvert.py": "the model builder in a sandboxed child, generation",
    "tests/backend/generate/test_variants.py": "quantizer, OpenVINO export and NNCF children",
    "tests/backend/generate/test_weightonly.py": "quantizer children and generation per variant",
    "tests/backend/generate/test_openvino.py": "OpenVINO export and NNCF children, LLMPipeline",
    "tests/pages/test_graph_generative.py": "GenAI ingest children behind the Graph page",
    "tests/e2e/test_browser.py": "browser",
    "tests/e2e/test_generation_browser.py": "browser, the model builder and a generation job run",
    "tests/e2e/test_run_script.py": "scripts/run with its worker",
    "tests/e2e/test_serve_browser.py": "browser and Triton",
    "tests/e2e/test_gates.py": "browser and three servers, two of them fresh",
    "tests/e2e/test_signed_link.py": "browser and a worker run",
    "tests/e2e/test_graph_overlay.py": "browser, a server and a worker run",
    "tests/e2e/test_signin.py": "browser",
    "tests/e2e/test_headless_shell.py": "browser",
    "tests/e2e/test_signout_restart.py": "browser and a server restart",
    "tests/e2e/test_upload_gate.py": "browser",
    "tests/backend/cluster/test_dispatch.py": "Ray cluster",
    "tests/backend/cluster/test_failures.py": "Ray cluster",
    "tests/backend/cluster/test_head_restart.py": "Ray cluster",
    "tests/backend/compat/test_groundtruth.py": "runs ONNX's node tests for real",
    "tests/backend/compat/test_groundtruth_openvino.py": "runs ONNX's node tests for real",
    "tests/backend/models/test_upload_locks.py": "racing child processes",
    "tests/backend/jobs/test_generation_job.py": "worker runs of generation jobs",
    "tests/backend/queue/test_fenced_artifacts.py": "worker run",
    "tests/backend/queue/test_metrics.py": "worker run",
    "tests/backend/jobs/test_serving_job.py": "Triton and a worker run",
    "tests/backend/queue/test_supervisor.py": "scripts/worker supervising a worker",
    "tests/backend/queue/test_worker.py": "worker runs",
    "tests/backend/queue/test_wrong_outputs.py": "worker runs and CLI runs",
    "tests/backend/reporting/test_frames.py": "worker runs",
    "tests/backend/reporting/test_cost.py": "a worker run (wrong outputs) and a CLI show",
    "tests/backend/serving/test_prediction.py": "Triton",
    "tests/backend/serving/test_provider.py": "Triton",
    "tests/backend/serving/test_server.py": "Triton",
    "tests/backend/test_cli.py": "worker runs",
    "tests/backend/test_cli_newcomer.py": "CLI subprocesses, a worker run and the real matrix",
    "tests/backend/auth/test_oidc_verified.py": "a real OIDC provider server",
    "tests/pages/test_access.py": "worker runs behind the pages",
    "tests/pages/test_compatibility_page.py": "builds the real matrix",
    "tests/pages/test_wrong_outputs_pages.py": "worker runs behind the pages",
    "tests/pages/test_evaluation_set.py": "worker run",
    "tests/pages/test_graph.py": "worker run and the viewer",
    "tests/pages/test_generation_pages.py": "the model builder and a generation job run",
    "tests/pages/test_home.py": "worker run",
    "tests/pages/test_hot_node_links.py": "browser",
    "tests/pages/test_jobs.py": "worker runs",
    "tests/pages/test_live_sessions.py": "argon2 sign-ins through app.py, several each",
    "tests/pages/test_mixed_search_page.py": "worker run",
    "tests/pages/test_regression_view.py": "a CLI regression check: two pairs of dialog children",
    "tests/pages/test_baseline_drift.py": "two CLI sweeps under a runtime environment",
    "tests/backend/generate/test_benchmark.py": (
        "trains the tiny Llama, converts it with the GenAI builder, measures in a sandboxed child"
    ),
    "tests/backend/generate/test_engine.py": (
        "trains the tiny Llama, converts it with the GenAI builder, runs 64 sequences"
    ),
    "tests/backend/generate/test_openvino_genai.py": (
        "exports the tiny Llama to OpenVINO IR in a sandboxed child and measures two runtimes"
    ),
    "tests/backend/runtimes/test_genai_torch.py": (
        "trains the grouped-query tiny Llama on first use, traces its decode step"
    ),
    "tests/backend/generate/test_torch_genai.py": (
        "trains the tiny Llama, measures ort-genai and transformers + PyTorch in sandboxed children"
    ),
    "tests/pages/test_optimize_tensorrt.py": "worker run",
    "tests/pages/test_profile_views.py": "worker run with profiling",
    "tests/pages/test_profile_if_branches.py": "worker run with profiling",
    "tests/backend/test_cli_foreground.py": "a real worker beside two CLI runs",
    "tests/pages/test_serve_measured.py": "Triton and a worker run",
    "tests/pages/test_untrusted_text.py": "worker run behind every page",
    "tests/storage/test_migration_race.py": "racing processes on SQLite and PostgreSQL",
    "tests/test_streamlit_config.py": "starts a Streamlit server",
}

SLOW_TESTS = {
    "tests/backend/serving/test_download.py": "a worker run, a repository zip and the Serve page",
    "tests/backend/engine/test_mixed.py::test_a_best_step_of_no_fp32_node_is_queued_as_plain_int8_and_said": "a search in sandboxed children",  # noqa: E501
    "tests/backend/generate/test_job_reports.py::test_show_and_export_read_a_generation_jobs_points": "a generation job's worker run, then CLI calls",  # noqa: E501
    "tests/backend/jobs/test_regression_check.py::test_an_a_a_check_says_same": "CLI runs, two pairs of dialog children per check",  # noqa: E501
    "tests/backend/jobs/test_regression_check.py::test_openvino_versions_are_checked_like_onnx_runtimes": "two dialog children under two OpenVINO versions",  # noqa: E501
    "tests/backend/jobs/test_regression_check.py::test_a_time_cap_too_short_for_samples_says_so_in_one_sentence_and_gives_no_verdict": "a CLI check: two pairs of dialog children",  # noqa: E501
    "tests/backend/jobs/test_regression_check.py::test_one_check_over_two_models_gives_each_its_verdict_from_its_own_samples": "a CLI check over two models: eight dialog children",  # noqa: E501
    "tests/backend/auth/test_throttle.py": "sign-in hashing rounds",
    "tests/backend/compat/test_columns.py::test_ort_cpu_matches_kernels_by_element_type": "real sessions per node",  # noqa: E501
    "tests/backend/compat/test_columns.py::test_ort_cuda_says_when_a_node_falls_back_to_cpu": "real sessions per node",  # noqa: E501
    "tests/backend/compat/test_matrix.py::test_custom_domain_op_is_unsupported_on_every_backend": "real matrix",  # noqa: E501
    "tests/backend/compat/test_matrix.py::test_float16_node_without_cpu_kernel_is_partial_because_ort_casts_it": "real matrix",  # noqa: E501
    "tests/backend/compat/test_matrix.py::test_frame_has_one_row_per_node_and_backend_with_real_placement": "real matrix",  # noqa: E501
    "tests/backend/compat/test_matrix.py::test_library_model_matrix_is_cached_and_exports_csv_and_json": "real matrix",  # noqa: E501
    "tests/backend/compat/test_matrix.py::test_mlp_runs_on_every_backend_and_real_cpu_placement_agrees": "real matrix",  # noqa: E501
    "tests/backend/compat/test_matrix.py::test_node_with_no_kernel_for_its_type_is_unsupported_and_the_real_session_fails": "real matrix",  # noqa: E501
    "tests/backend/engine/test_npzfeeds.py::test_npz_that_declares_far_more_than_it_holds_is_refused_in_a_child": "child process",  # noqa: E501
    "tests/backend/engine/test_ovprofile.py::test_an_openvino_int8_result_gets_explanations_computed_from_its_counters": "worker run",  # noqa: E501
    "tests/backend/engine/test_profile.py::test_sweep_with_profiling_stores_profiles_and_cites_them": "worker run",  # noqa: E501
    "tests/backend/launch/test_children.py::test_the_parent_removes_the_folder_of_a_child_it_killed": "child process",  # noqa: E501
    "tests/backend/launch/test_children.py::test_time_limit_kills_the_child": "child process",
    "tests/backend/launch/test_sandbox.py::test_hostile_savedmodel_initializer_never_reaches_the_host": "TensorFlow in the sandbox",  # noqa: E501
    "tests/backend/launch/test_sandbox.py::test_without_a_working_sandbox_savedmodels_are_refused_with_the_reason": "TensorFlow child",  # noqa: E501
    "tests/backend/models/test_ingest.py::test_tensorflow_savedmodel_without_signatures_is_rejected": "TensorFlow conversion",  # noqa: E501
    "tests/backend/models/test_ingest.py::test_tensorflow_savedmodel_zip_is_converted_and_matches_tensorflow": "TensorFlow conversion",  # noqa: E501
    "tests/backend/models/test_tfconvert.py::test_damaged_savedmodel_reports_that_tensorflow_cannot_load_it": "TensorFlow conversion",  # noqa: E501
    "tests/backend/models/test_tfconvert.py::test_tensorflow_conversion_uses_the_chosen_opset_and_matches_tensorflow": "TensorFlow conversion",  # noqa: E501
    "tests/backend/models/test_tfconvert.py::test_tensorflow_savedmodel_with_several_signatures_lists_them": "TensorFlow conversion",  # noqa: E501
    "tests/backend/queue/test_uploads.py::test_a_wrong_input_name_is_refused_and_nothing_is_stored": "worker run",  # noqa: E501
    "tests/backend/queue/test_uploads.py::test_an_evaluation_set_with_float_labels_is_refused_and_nothing_is_stored": "worker run",  # noqa: E501
    "tests/backend/queue/test_uploads.py::test_an_evaluation_set_with_labels_is_stored_and_scored_by_the_worker": "worker run",  # noqa: E501
    "tests/backend/queue/test_uploads.py::test_an_uploaded_npz_is_stored_and_named_in_the_sweep": "worker run",  # noqa: E501
    "tests/backend/queue/test_jobs.py::test_stored_results_are_typed": "worker run",
    "tests/backend/jobs/test_baselines.py::test_pin_unpin_and_list_are_audited": "worker run",
    "tests/backend/jobs/test_mixedsearch.py::test_a_search_job_stores_each_step_keeps_the_bad_layer_and_meets_the_bound": "worker run",  # noqa: E501
    "tests/backend/jobs/test_mixedsearch.py::test_a_search_whose_every_step_fails_fails_the_job": "worker run",  # noqa: E501
    "tests/backend/jobs/test_mixedsearch.py::test_a_search_on_a_model_with_long_node_names_stores_its_steps": "worker run",  # noqa: E501
    "tests/backend/models/test_tfconvert.py::test_tensorflow_conversion_is_stopped_at_the_configured_timeout": "TensorFlow child",  # noqa: E501
    "tests/backend/models/test_pt2.py::test_encoder_pt2_added_by_the_cli_keeps_dynamic_dims_matches_and_sweeps": "torch export child and a worker run",  # noqa: E501
    "tests/backend/models/test_pt2.py::test_an_operator_the_exporter_cannot_handle_is_quoted": "torch export child",  # noqa: E501
    "tests/backend/models/test_pt2.py::test_a_crafted_pickle_that_slipped_past_the_checks_still_never_runs": "torch child",  # noqa: E501
    "tests/backend/queue/test_queue_races.py": "racing workers",
    "tests/backend/reporting/test_csvsafe.py::test_compatibility_csv_defuses_a_hostile_node_name": "real matrix",  # noqa: E501
    "tests/backend/serving/test_cli_advice.py": "Triton",
    "tests/backend/serving/test_cheapest.py::test_the_cheapest_configuration_of_a_real_sweep_meets_the_bound_and_names_the_runner_up": "worker run",  # noqa: E501
    "tests/backend/serving/test_cli_verbs.py::test_serve_load_prints_one_row_per_concurrency": "Triton",  # noqa: E501
    "tests/backend/serving/test_export.py::test_the_zip_and_the_local_server_share_one_writer_and_triton_loads_the_local_variant": "Triton",  # noqa: E501
    "tests/backend/serving/test_loadgen.py": "Triton",
    "tests/backend/serving/test_runtime_env.py::test_a_server_that_loads_another_version_than_the_pins_is_refused": "Triton",  # noqa: E501
    "tests/backend/serving/test_llm_serving.py": "Triton serving the tiny Llama, streamed",
    "tests/backend/test_host.py::test_a_watch_sees_another_process_busy_and_not_this_one": "busy child process",  # noqa: E501
    "tests/backend/test_viewer.py::test_viewer_renders_a_model_in_chromium_without_csp_violations": "browser",  # noqa: E501
    "tests/backend/test_viewer_focus.py": "browser",
    "tests/backend/test_viewer_weightless.py": "browser",
    "tests/pages/test_graph_large.py::test_a_large_upload_is_shown_from_a_weightless_copy_made_in_a_child": "ingest, cost and weightless-copy children behind the page",  # noqa: E501
    "tests/pages/test_compare.py": "worker runs",
    "tests/pages/test_components.py::test_bound_widgets_start_from_the_url": "Streamlit app runs",
    "tests/pages/test_components.py::test_bound_widgets_write_their_value_back_to_the_url": "Streamlit app runs",  # noqa: E501
    "tests/pages/test_models.py": "uploads through the real ingest",
    "tests/pages/test_optimize.py": "worker runs",
    "tests/pages/test_serve.py": "worker run and Triton",
}


SERIAL_FIXTURES = {
    "triton_environment": "Triton measures latency and load curves",
    "ray_cluster": "a Ray cluster of three nodes on two cores",
}

SERIAL_MODULES = {
    "tests/e2e/test_browser.py": "browser and a Streamlit server, with waits",
    "tests/e2e/test_generation_browser.py": "browser, a Streamlit server, its worker, waits",
    "tests/e2e/test_run_script.py": "scripts/run's server and worker, with waits",
    "tests/e2e/test_serve_browser.py": "browser and Triton",
    "tests/e2e/test_gates.py": "browser and three servers (two fresh), with waits",
    "tests/e2e/test_signed_link.py": "browser and a worker run, with waits",
    "tests/e2e/test_graph_overlay.py": "browser driving a Streamlit server",
    "tests/e2e/test_signin.py": "browser and an OIDC provider, with waits",
    "tests/e2e/test_signout_restart.py": "browser and a server restart, with waits",
    "tests/e2e/test_upload_gate.py": "browser, with waits",
    "tests/e2e/test_headless_shell.py": "browser",
    "tests/backend/cluster/test_failures.py": "Ray cluster",
    "tests/backend/cluster/test_head_restart.py": "Ray head restarts",
    "tests/backend/jobs/test_serving_job.py": "Triton",
    "tests/backend/serving/test_llm_serving.py": "Triton: token latencies under load",
    "tests/backend/serving/test_provider.py": "Triton",
    "tests/backend/serving/test_server.py": "Triton and its /dev/shm regions",
    "tests/backend/test_viewer_focus.py": "browser",
    "tests/backend/test_viewer_weightless.py": "browser",
    "tests/pages/test_hot_node_links.py": "browser",
    "tests/pages/test_serve_measured.py": "Triton",
}

# Tests whose assertions are timings, or that check state every process shares: serial, and run
# after the rest with nothing beside them.
ALONE_MODULES = {
    "tests/backend/serving/test_loadgen.py": "Triton: offered against achieved rates",
    "tests/backend/serving/test_prediction.py": "Triton: predictions against measurements",
    "tests/test_leaks.py": "every process's /dev/shm regions and children",
}

ALONE_TESTS = {
    "tests/backend/serving/test_cli_advice.py::test_recommend_with_confirm_measures_the_best_policies_on_the_real_server": "Triton: measured against predicted rates",  # noqa: E501
    "tests/pages/test_serve_measured.py::test_a_study_of_the_swept_file_on_this_host_feeds_the_sweeps_prediction": "Triton: a prediction from a study's costs against its measured rate",  # noqa: E501
    "tests/backend/jobs/test_regression_check.py::test_an_a_a_check_says_same": "an A/A timing verdict",  # noqa: E501
    "tests/backend/engine/test_measure.py::test_steady_workload_stops_once_three_windows_agree": "a sleep's jitter",  # noqa: E501
    "tests/backend/engine/test_measure.py::test_first_inference_is_timed_apart_from_the_steady_state": "a sleep's jitter",  # noqa: E501
    "tests/backend/test_host.py::test_a_watch_sees_another_process_busy_and_not_this_one": "a spinner that must own a core",  # noqa: E501
    "tests/backend/test_host.py::test_a_configuration_measured_beside_busy_processes_says_so": "spinners on every core",  # noqa: E501
}

SERIAL_TESTS = {
    "tests/backend/serving/test_cli_verbs.py::test_serve_load_prints_one_row_per_concurrency": "Triton",  # noqa: E501
    "tests/backend/serving/test_export.py::test_the_zip_and_the_local_server_share_one_writer_and_triton_loads_the_local_variant": "Triton",  # noqa: E501
    "tests/backend/test_viewer.py::test_viewer_renders_a_model_in_chromium_without_csp_violations": "browser",  # noqa: E501
}


# Serial tests that share nothing with the other serial tests (no Triton, no browser, no /dev/shm;
# their own Ray cluster and PostgreSQL): the second lane, beside the first.
CLUSTER_LANE = "tests/backend/cluster/"


def _reason(nodeid: str, fixtures: list[str]) -> str | None:
    module, _, name = nodeid.partition("::")
    if "[postgresql" in name:  # the same test parametrized over SQLite and a real PostgreSQL
        return "a real PostgreSQL server"
    for fixture in fixtures:
        if fixture in SERVER_FIXTURES:
            return SERVER_FIXTURES[fixture]
    if module in SLOW_MODULES:
        return SLOW_MODULES[module]
    test = f"{module}::{name.split('[')[0]}"
    return SLOW_TESTS.get(test) or SLOW_TESTS.get(module)


def _serial_reason(nodeid: str, fixtures: list[str]) -> str | None:
    module, _, name = nodeid.partition("::")
    for fixture in fixtures:
        if fixture in SERIAL_FIXTURES:
            return SERIAL_FIXTURES[fixture]
    listed = SERIAL_MODULES.get(module) or SERIAL_TESTS.get(f"{module}::{name.split('[')[0]}")
    return listed or _alone_reason(nodeid)


def _alone_reason(nodeid: str) -> str | None:
    module, _, name = nodeid.partition("::")
    return ALONE_MODULES.get(module) or ALONE_TESTS.get(f"{module}::{name.split('[')[0]}")


def mark(items: list[pytest.Item], whole_suite: bool) -> None:
    """Mark every slow and every serial item; on a whole-suite run, fail if a listed name
    matched nothing."""
    used: set[str] = set()
    for item in items:
        fixtures = list(getattr(item, "fixturenames", []))
        module, _, name = item.nodeid.partition("::")
        names = {module, f"{module}::{name.split('[')[0]}"}
        reason = _reason(item.nodeid, fixtures)
        if reason:
            item.add_marker(pytest.mark.slow(reason=reason))
            used.update(names)
        serial = _serial_reason(item.nodeid, fixtures)
        if serial:
            item.add_marker(pytest.mark.serial(reason=serial))
            used.update(names)
            if module.startswith(CLUSTER_LANE):
                item.add_marker(pytest.mark.cluster(reason="the cluster lane: " + serial))
        alone = _alone_reason(item.nodeid)
        if alone:  # serial too (_serial_reason)
            item.add_marker(pytest.mark.alone(reason=alone))
    if whole_suite:
        listed = {*SLOW_MODULES, *SLOW_TESTS, *SERIAL_MODULES, *SERIAL_TESTS}
        listed |= {*ALONE_MODULES, *ALONE_TESTS}
        stale = sorted(listed - used)
        if stale:
            raise pytest.UsageError(f"tests/tiers.py lists tests that no longer exist: {stale}")


# scripts/test's set-up collects the suite once (in the background) with this variable naming a
# file, and the collection writes the serial tests' node ids there. Each serial part runs those
# ids under its own -m, so it imports only their files: started with -m alone it would collect
# all 1,200 tests again (about 7 CPU-s) to deselect nearly all of them.
SERIAL_IDS_FILE = "PYTEST_SERIAL_IDS"


def write_serial_ids(items: list[pytest.Item], path: Path) -> None:
    """One line per serial test (alone and cluster tests are serial too) of a marked suite."""
    path.write_text("".join(f"{i.nodeid}\n" for i in items if i.get_closest_marker("serial")))
