"""What an upload may be, in one sentence fragment that every refusal and the Home page share, so
the list of accepted kinds cannot drift between them again (it once named only ONNX and
SavedModel after .pt2 and generative folders were added)."""

from __future__ import annotations

ACCEPTED_UPLOADS = (
    "a .onnx file, or a .zip of an ONNX model with its external data files, of a TensorFlow "
    "SavedModel folder, of a Hugging Face model folder or of an ONNX Runtime GenAI model folder, "
    "or a PyTorch ExportedProgram (.pt2)"
)
