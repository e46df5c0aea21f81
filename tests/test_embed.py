import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from reportfed.core.errors import ConfigError, EmbeddingError
from reportfed.embed import OpenAIEmbedder, embed_texts, make_embedder
from reportfed.embed.cache import EmbeddingCache, text_key

TEXTS = [
    "Heart size normal.",
    "Small left pleural effusion.",
    "No pneumothorax.",
    "Heart size normal.",
]


class Counting:
    """Wraps a real embedder and records what it was asked to embed."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.calls = inner, []
        self.fingerprint, self.cache_key, self.dim = inner.fingerprint, inner.cache_key, inner.dim

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_minilm_is_real_and_normalised(minilm) -> None:
    x = minilm.embed(["Cardiomegaly.", "The heart is enlarged.", "Fracture of the left clavicle."])
    assert x.shape == (3, 384) and x.dtype == np.float32
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-3)
    assert x[0] @ x[1] > x[0] @ x[2] + 0.1  # meaning, not noise


def test_cache_miss_then_hit_and_partial_reuse(minilm, tmp_path) -> None:
    counting = Counting(minilm)
    first = embed_texts(TEXTS, counting, cache_dir=tmp_path, progress=False)
    assert counting.calls == [TEXTS[:3]]  # duplicates embedded once
    assert np.array_equal(first[0], first[3])
    again = embed_texts(TEXTS, counting, cache_dir=tmp_path, progress=False)
    assert len(counting.calls) == 1 and np.array_equal(first, again)
    embed_texts([*TEXTS, "New text."], counting, cache_dir=tmp_path, progress=False)
    assert counting.calls[-1] == ["New text."]


def test_corrupted_shard_is_rebuilt_never_returned(minilm, tmp_path) -> None:
    counting = Counting(minilm)
    good = embed_texts(TEXTS, counting, cache_dir=tmp_path, progress=False)
    (shard,) = EmbeddingCache(tmp_path, minilm.cache_key).dir.glob("shard-*.npz")
    raw = bytearray(shard.read_bytes())
    raw[-200] ^= 0xFF  # flip a byte inside the stored vectors
    shard.write_bytes(bytes(raw))
    rebuilt = embed_texts(TEXTS, counting, cache_dir=tmp_path, progress=False)
    assert len(counting.calls) == 2 and np.allclose(rebuilt, good)
    shard_files = list(EmbeddingCache(tmp_path, minilm.cache_key).dir.glob("shard-*.npz"))
    assert len(shard_files) == 1 and shard_files[0] != shard
    shard_files[0].write_bytes(b"truncated")
    assert np.allclose(embed_texts(TEXTS, counting, cache_dir=tmp_path, progress=False), good)


def test_a_shard_of_another_dimension_is_dropped_not_fatal(minilm, tmp_path) -> None:
    counting = Counting(minilm)
    good = embed_texts(TEXTS, counting, cache_dir=tmp_path, progress=False)
    cache = EmbeddingCache(tmp_path, minilm.cache_key)
    cache.store([text_key("New text.")], np.ones((1, 8), dtype=np.float32))  # a foreign shard
    again = embed_texts([*TEXTS, "New text."], counting, cache_dir=tmp_path, progress=False)
    assert again.shape == (5, 384) and np.allclose(again[:4], good, atol=1e-6)
    assert counting.calls[-1] == ["New text."]  # the foreign vector was dropped, not returned


def test_shards_all_of_a_wrong_size_and_a_directory_entry_are_removed(
    minilm, tmp_path, caplog
) -> None:  # type: ignore[no-untyped-def]
    """Every shard rewritten with 8-dim vectors (digests valid), with and without the recorded
    size, and a directory where a shard should be: removed with a warning, texts re-embedded."""
    counting = Counting(minilm)
    good = embed_texts(TEXTS, counting, cache_dir=tmp_path, progress=False)
    cache = EmbeddingCache(tmp_path, minilm.cache_key)
    assert cache.dim == 384
    keys = [text_key(t) for t in dict.fromkeys(TEXTS)]
    for recorded in (True, False):
        for shard in cache.dir.glob("shard-*.npz"):
            shard.unlink()
        if not recorded:
            (cache.dir / "dim.txt").unlink()
        cache.store(keys, np.ones((len(keys), 8), dtype=np.float32))
        (cache.dir / "dim.txt").write_text("384") if recorded else (cache.dir / "dim.txt").unlink()
        (cache.dir / "shard-0000.npz").mkdir()
        again = embed_texts(TEXTS, counting, cache_dir=tmp_path, progress=False)
        assert again.shape == (4, 384) and np.allclose(again, good, atol=1e-6)
        assert not (cache.dir / "shard-0000.npz").exists()
        assert "corrupted" in caplog.text and cache.dim == 384


def test_an_export_quiets_the_exporters_and_leaves_the_applications_logging_as_it_was(
    tmp_path, caplog
) -> None:
    """The exporters' chatter (ONNX Runtime's quantizer logs on the root logger) is dropped while
    a model is written; the application's own logger, its levels and logging.disable stay."""
    import logging

    from reportfed.embed.exported import build_atomically

    app = logging.getLogger("hospital_app")
    app.setLevel(logging.INFO)
    logging.getLogger("torch").setLevel(logging.DEBUG)
    logging.disable(logging.DEBUG)  # the application's own setting

    def write(out) -> None:  # type: ignore[no-untyped-def]
        logging.warning("quantizer advice")  # on the root logger, as onnxruntime does
        logging.getLogger("torch.onnx").warning("tracer chatter")
        app.warning("the application's warning")
        out.write_bytes(b"model")

    try:
        with caplog.at_level(logging.INFO):
            build_atomically(tmp_path / "m.onnx", write, "test")
        said = [r.getMessage() for r in caplog.records]
        assert said == ["the application's warning"], said
        assert (tmp_path / "m.onnx").read_bytes() == b"model"
        assert logging.root.manager.disable == logging.DEBUG
        assert logging.getLogger("torch").level == logging.DEBUG
        assert app.level == logging.INFO and not logging.getLogger().filters
    finally:
        logging.disable(logging.NOTSET)
        logging.getLogger("torch").setLevel(logging.NOTSET)


def test_unknown_embedder_kind_is_a_one_line_error() -> None:
    from reportfed.core.errors import EmbeddingError

    with pytest.raises(EmbeddingError, match="unknown embedder kind 'bert'"):
        make_embedder("bert:/models/x")


def test_cache_is_keyed_by_precision_and_models_by_vector_space(tmp_path) -> None:
    bf16 = make_embedder("minilm", precision="bf16")
    fp32 = make_embedder("minilm", precision="fp32")
    assert fp32.fingerprint == bf16.fingerprint and fp32.cache_key != bf16.cache_key
    a = embed_texts(TEXTS[:1], bf16, cache_dir=tmp_path, progress=False)
    b = embed_texts(TEXTS[:1], fp32, cache_dir=tmp_path, progress=False)
    assert not np.array_equal(a, b) and float(a[0] @ b[0]) > 0.999


def test_auto_precision_never_emulates_bf16(monkeypatch) -> None:
    from reportfed.embed.precision import native_bf16

    monkeypatch.delenv("REPORTFED_PRECISION", raising=False)
    assert make_embedder("minilm").precision == ("bf16" if native_bf16("cpu") else "fp32")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # a processor without AVX512-BF16
    assert not native_bf16("cpu") and make_embedder("minilm").precision == "fp32"
    monkeypatch.setenv("REPORTFED_PRECISION", "bf16")  # what --precision bf16 sets
    assert make_embedder("minilm").precision == "bf16"
    monkeypatch.setenv("REPORTFED_PRECISION", "fp16")
    with pytest.raises(ConfigError, match="precision must be one of auto, fp32, bf16"):
        make_embedder("minilm")


def test_hf_mean_pooling_path_matches_sentence_transformers() -> None:
    """Bio_ClinicalBERT's code path (AutoModel + mean pooling), tested with MiniLM's weights."""
    hf = make_embedder("hf:minilm")
    st = make_embedder("minilm", precision="fp32", backend="torch")
    a = hf.embed(TEXTS)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    assert hf.dim == 384 and np.allclose(a, st.embed(TEXTS), atol=1e-5)
    with pytest.raises(EmbeddingError, match="cannot load Hugging Face model"):
        _ = make_embedder("hf:/nonexistent/Bio_ClinicalBERT").dim


def test_onnx_backends_fp32_is_torch_fp32s_space_and_int8_a_space_of_its_own(tmp_path) -> None:
    torch32 = make_embedder("minilm", precision="fp32", backend="torch")
    onnx32 = make_embedder("minilm", backend="onnx")
    int8 = make_embedder("minilm", backend="onnx-int8")
    assert onnx32.fingerprint == torch32.fingerprint and onnx32.cache_key != torch32.cache_key
    assert int8.fingerprint == torch32.fingerprint + ":int8-per-channel"
    ref = torch32.embed(TEXTS)
    assert np.sum(ref * onnx32.embed(TEXTS), axis=1).min() > 0.9999
    cos8 = np.sum(ref * int8.embed(TEXTS), axis=1)
    assert cos8.min() > 0.97 and cos8.max() < 0.9999  # close (per channel), not the same vectors
    with pytest.raises(EmbeddingError, match="runs sentence-transformers models"):
        make_embedder("hf:minilm", backend="onnx")
    with pytest.raises(EmbeddingError, match="backend must be one of"):
        make_embedder("minilm", backend="tensorrt")


def test_bf16_stays_within_cosine_0999_of_fp32(iu_embedded) -> None:
    table, _ = iu_embedded
    idx = np.random.default_rng(0).choice(len(table), 64, replace=False)
    texts = [table.texts[i] for i in idx]
    x32 = make_embedder("minilm", precision="fp32").embed(texts)
    x16 = make_embedder("minilm", precision="bf16").embed(texts)
    cos = np.sum(x32 * x16, axis=1) / np.linalg.norm(x16, axis=1) / np.linalg.norm(x32, axis=1)
    assert cos.min() > 0.999


def test_openvino_gives_torch_fp32s_space_in_either_precision(monkeypatch) -> None:
    from reportfed.embed.precision import native_bf16

    torch32 = make_embedder("minilm", precision="fp32", backend="torch")
    ref = torch32.embed(TEXTS)
    for precision in ("fp32", "bf16") if native_bf16("cpu") else ("fp32",):
        ov = make_embedder("minilm", precision=precision, backend="openvino")
        assert ov.fingerprint == torch32.fingerprint
        assert ov.cache_key == f"{torch32.fingerprint}:openvino-{precision}"
        assert np.sum(ref * ov.embed(TEXTS), axis=1).min() > 0.9999
    with pytest.raises(EmbeddingError, match="runs sentence-transformers models"):
        make_embedder("hf:minilm", backend="openvino")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # a processor without AVX512-BF16
    with pytest.raises(ConfigError, match="runs bf16 only on a CPU that multiplies bf16"):
        make_embedder("minilm", precision="bf16", backend="openvino")
    assert make_embedder("minilm", backend="openvino").cache_key.endswith(":openvino-fp32")


def test_exported_backends_tokenize_as_transformers_does(iu_embedded) -> None:
    """The exported backends read tokenizer.json with ``tokenizers`` alone (no transformers at
    start-up); the ids, masks and types are transformers' own for every IU sentence and for a
    text beyond the 256 tokens the model reads."""
    from transformers import AutoTokenizer

    table, _ = iu_embedded
    embedder = make_embedder("minilm", backend="openvino")
    reference = AutoTokenizer.from_pretrained(embedder.path)
    texts = sorted(set(table.texts[:400]), key=len)
    texts.append(" ".join(["Small left pleural effusion."] * 200))
    for start in range(0, len(texts), 64):
        batch = texts[start : start + 64]
        want = reference(batch, padding=True, truncation=True, max_length=256, return_tensors="np")
        got = embedder.tokenize(batch)
        assert set(got) == set(want)
        for name, ids in got.items():
            np.testing.assert_array_equal(ids, want[name])
    assert got["input_ids"].shape[1] == 256


def test_auto_backend_is_openvino_on_a_cpu_in_bf16_only_where_native(monkeypatch) -> None:
    import importlib.util

    from reportfed.embed import precision
    from reportfed.embed.openvino import OpenVinoEmbedder

    # this CPU's caps (a run as on a machine without AVX512-BF16) and choices do not apply here
    for name in (
        "REPORTFED_BACKEND",
        "REPORTFED_PRECISION",
        "ONEDNN_MAX_CPU_ISA",
        "ATEN_CPU_CAPABILITY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    auto = make_embedder("minilm")
    assert isinstance(auto, OpenVinoEmbedder) and auto.precision == "bf16"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # a processor without AVX512-BF16
    assert make_embedder("minilm").cache_key.endswith(":openvino-fp32")  # never emulated bf16
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "openvino" else find_spec(name, *a),
    )
    assert make_embedder("minilm").cache_key.endswith(":bf16")  # OpenVINO not installed: torch


# -- OpenAI-compatible API over real HTTP ----------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    failures_left = 0
    requests: ClassVar[list[dict]] = []

    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass

    def _send(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), **body}
        )
        if self.path != "/v1/embeddings":
            return self._send(404, {"error": {"message": "not found"}})
        if body["model"] == "missing-model":
            return self._send(404, {"error": {"message": "model 'missing-model' does not exist"}})
        if type(self).failures_left > 0:
            type(self).failures_left -= 1
            return self._send(503, {"error": {"message": "overloaded"}})
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": [b / 255 for b in hashlib.sha256(t.encode()).digest()[:8]],
            }
            for i, t in enumerate(inputs)
        ]
        self._send(
            200,
            {
                "object": "list",
                "data": data[::-1],
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )


@pytest.fixture()
def api_server():  # type: ignore[no-untyped-def]
    _Handler.requests, _Handler.failures_left = [], 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_backend_over_http_batches_and_orders(api_server, tmp_path) -> None:
    emb = OpenAIEmbedder("local-embed", base_url=api_server, api_key="sk-test", batch_size=2)
    x = embed_texts(TEXTS, emb, cache_dir=tmp_path, progress=False)
    expected = [[b / 255 for b in hashlib.sha256(t.encode()).digest()[:8]] for t in TEXTS]
    assert np.allclose(x, np.array(expected, dtype=np.float32))  # order restored from "index"
    batches = [r["input"] for r in _Handler.requests]
    assert batches == [TEXTS[:2], TEXTS[2:3]]  # deduplicated, batched by 2
    assert _Handler.requests[0]["auth"] == "Bearer sk-test"
    assert emb.fingerprint == f"openai:{api_server}:local-embed" and emb.dim == 8
    embed_texts(TEXTS, emb, cache_dir=tmp_path, progress=False)
    assert len(_Handler.requests) == 2  # all cached


def test_openai_backend_retries_5xx_with_backoff(api_server) -> None:
    _Handler.failures_left = 2
    emb = OpenAIEmbedder("local-embed", base_url=api_server, max_retries=3)
    assert emb.embed(["a"]).shape == (1, 8)
    assert len(_Handler.requests) == 3


def test_openai_backend_4xx_is_a_clear_error(api_server) -> None:
    emb = OpenAIEmbedder("missing-model", base_url=api_server)
    with pytest.raises(EmbeddingError, match="HTTP 404 for model 'missing-model'"):
        emb.embed(["a"])
    assert len(_Handler.requests) == 1  # a 4xx is not retried


def test_openai_backend_unreachable_is_a_clear_error() -> None:
    emb = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2)
    with pytest.raises(EmbeddingError, match="cannot reach embeddings API"):
        emb.embed(["a"])


@pytest.mark.parametrize(("backend", "damage"), [("openvino", "truncated"), ("onnx", "empty")])
def test_a_damaged_export_in_the_user_cache_is_built_anew_once_with_a_warning(
    processes: None, tmp_path: Path, backend: str, damage: str
) -> None:
    """Real processes, as a user types it: ``reportfed embed`` with an ONNX export in the user
    cache cut short (a full disk, a killed export) warns once, naming the folder, builds it
    anew and embeds; the next run reads the new export without a word."""
    import os
    import subprocess

    reports = tmp_path / "reports.csv"
    reports.write_text("Reports\nMild cardiomegaly.\nNo pleural effusion.\n")
    env = {**os.environ, "REPORTFED_CACHE_DIR": str(tmp_path / "user-cache")}

    def embed(cache: str) -> subprocess.CompletedProcess[str]:
        cmd = ["reportfed", "embed", "--reports", str(reports), "--backend", backend]
        cmd += ["--cache-dir", str(tmp_path / cache)]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)

    assert embed("first").returncode == 0
    (export,) = (tmp_path / "user-cache" / "onnx").rglob("model-fp32.onnx")
    export.write_bytes(export.read_bytes()[:4096] if damage == "truncated" else b"")
    done = embed("second")
    assert done.returncode == 0, done.stderr[-2000:]
    warned = re.findall(r"reportfed: warning: [^\r\n]*", done.stderr)  # maybe after a bar
    assert len(warned) == 1 and str(export.parent) in warned[0] and "building it anew" in warned[0]
    assert "Traceback" not in done.stderr
    again = embed("third")
    assert again.returncode == 0 and "reportfed: warning:" not in again.stderr
