"""The versioned support lists: provenance present and entries transcribed from the sources."""

from __future__ import annotations

from backend.compat import datafiles


def test_every_list_names_its_source_release_and_retrieval_date():
    for support in datafiles.all_lists():
        assert support.source.startswith("https://github.com/")
        assert support.release and support.retrieved
        assert support.ops


def test_entries_match_the_published_lists():
    trt = datafiles.load("tensorrt")
    assert trt.extra["opset_range"] == [9, 24]
    assert trt.ops["LayerNormalization"]["types"] == ["float", "float16", "bfloat16"]
    assert trt.ops["LayerNormalization"]["restrictions"].startswith("Only the first output")
    assert trt.ops["NonMaxSuppression"]["supported"] is True
    assert trt.ops["Unique"]["supported"] is False

    ov = datafiles.load("openvino")
    assert ov.entry("", "Bernoulli")["versions"] == []
    assert ov.entry("", "Softmax")["versions"] == [1, 11, 13]
    assert ov.entry("com.microsoft", "SkipLayerNormalization")["versions"] == [1]

    cuda = datafiles.load("ort-cuda")
    conv = cuda.entry("", "Conv")["kernels"][0]
    assert (conv["since"], conv["until"]) == (22, None)
    assert "tensor(bfloat16)" in conv["types"]["T"]
    assert cuda.entry("", "Mean") is None  # the CUDA EP has no Mean kernel


def test_fingerprint_names_every_data_file_version():
    fingerprint = datafiles.fingerprint()
    assert all(f"{key}:" in fingerprint for key in datafiles.FILES)
