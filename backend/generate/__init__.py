"""Large generative models: GenAI/HF ingest, weight-only quantization (ONNX Runtime MatMulNBits,
NNCF for OpenVINO) and the facts each variant states (weight bytes, what ran).

torch, transformers, onnxruntime-genai and openvino-genai are optional (requirements-genai.txt);
every module imports them lazily and says which one is missing.
"""
