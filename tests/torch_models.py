"""Small real PyTorch models saved the ways users save them (torch.export.save, torch.jit.save,
torch.save), and crafted .pt2 archives made from a real one by rewriting single members."""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections.abc import Callable
from pathlib import Path


def _torch():
    import torch

    return torch


def small_cnn():
    """A ResNet-style CNN (stem, one residual block, pooling, classifier) of a few kB."""
    torch = _torch()
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, width: int) -> None:
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width)

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(x + self.bn2(self.conv2(y)))

    class Cnn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8))
            self.block = Block(8)
            self.head = nn.Linear(8, 10)

        def forward(self, x):
            x = self.block(torch.relu(self.stem(x)))
            return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    torch.manual_seed(0)
    return Cnn().eval()


def small_encoder():
    """A two-layer transformer encoder over 16 features: (batch, sequence, 16) -> (.., 8)."""
    torch = _torch()
    nn = torch.nn

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(16, 32)
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(32, 8)

        def forward(self, x):
            return self.head(self.encoder(self.embed(x)))

    torch.manual_seed(0)
    return Encoder().eval()


def save_cnn_pt2(path: Path) -> Path:
    """The CNN exported with a dynamic batch (Dim 'batch', up to 32) and saved as .pt2."""
    torch = _torch()
    batch = torch.export.Dim("batch", min=1, max=32)
    program = torch.export.export(
        small_cnn(), (torch.randn(2, 3, 32, 32),), dynamic_shapes={"x": {0: batch}}
    )
    torch.export.save(program, path)
    return path


def save_encoder_pt2(path: Path) -> Path:
    """The encoder exported with dynamic batch and sequence and saved as .pt2."""
    torch = _torch()
    batch = torch.export.Dim("batch", min=1, max=64)
    sequence = torch.export.Dim("sequence", min=2, max=256)
    program = torch.export.export(
        small_encoder(), (torch.randn(2, 8, 16),), dynamic_shapes={"x": {0: batch, 1: sequence}}
    )
    torch.export.save(program, path)
    return path


def save_linear_pt2(path: Path, function: Callable | None = None) -> Path:
    """The cheapest real ExportedProgram: a Linear (or `function` of x) with a dynamic batch."""
    torch = _torch()

    class Small(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x):
            return function(x) if function is not None else self.linear(x)

    program = torch.export.export(
        Small().eval(),
        (torch.randn(4, 4),),
        dynamic_shapes=None if function else {"x": {0: torch.export.Dim("batch", max=16)}},
    )
    torch.export.save(program, path)
    return path


def save_torchscript(path: Path) -> Path:
    torch = _torch()
    torch.jit.save(torch.jit.script(small_cnn()), str(path))
    return path


def save_pickled_module(path: Path) -> Path:
    """torch.save of a whole module (built-in layers: a test-local class cannot be pickled)."""
    nn = _torch().nn
    _torch().save(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten()), path)
    return path


def rewrite(source: Path, target: Path, change: Callable[[str, bytes], bytes | None]) -> Path:
    """A copy of a .pt2 with members changed: change(name below the root, data) returns new
    bytes, or None to drop the member; members named in change.add (if set) are appended."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        root = old.namelist()[0].split("/", 1)[0]
        for info in old.infolist():
            data = change(info.filename[len(root) + 1 :], old.read(info))
            if data is not None:
                new.writestr(info.filename, data)
        for name, data in getattr(change, "add", {}).items():
            new.writestr(f"{root}/{name}", data, zipfile.ZIP_DEFLATED)
    return target


class RunsCode:
    """Unpickling this calls `call(*args)`: what a crafted archive would hide in a pickle."""

    def __init__(self, call: Callable, *args: object) -> None:
        self.call, self.args = call, args

    def __reduce__(self):
        return self.call, self.args


def with_hostile_sample_inputs(source: Path, target: Path, payload: object) -> Path:
    """The .pt2 whose sample inputs' data.pkl is replaced by a pickle of `payload`."""

    def change(name: str, data: bytes) -> bytes:
        if name != "data/sample_inputs/model.pt":
            return data
        out = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(data)) as inner, zipfile.ZipFile(out, "w") as rebuilt:
            for member in inner.infolist():
                body = inner.read(member)
                if member.filename.endswith("data.pkl"):
                    body = pickle.dumps(payload, protocol=2)
                rebuilt.writestr(member.filename, body)
        return out.getvalue()

    return rewrite(source, target, change)


def with_graph(source: Path, target: Path, edit: Callable[[dict], None]) -> Path:
    """The .pt2 whose models/model.json is edited in place by `edit`."""

    def change(name: str, data: bytes) -> bytes:
        if name != "models/model.json":
            return data
        graph = json.loads(data)
        edit(graph)
        return json.dumps(graph).encode()

    return rewrite(source, target, change)
