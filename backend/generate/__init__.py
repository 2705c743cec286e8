"""Large generative models once in the library (uploaded through backend/models/genai.py and
hfconvert.py): weight-only quantization (ONNX Runtime MatMulNBits, NNCF for OpenVINO), variants,
the generation benchmark, perplexity, and the facts each variant states (weight bytes, what ran).

torch, transformers, onnxruntime-genai and openvino-genai are optional (requirements-genai.txt);
every module imports them lazily and says which one is missing.
"""
