"""The first image of a pipeline's output as PNG bytes (``response_format: png``).

Takes what a diffusers pipeline returns (``.images`` or ``.frames``: PIL images, numpy arrays or
torch tensors, values in [0, 1]) and encodes its first image, or a video's first frame, with Pillow.
"""

from __future__ import annotations

import io


def images_of(output: object) -> object:
    """The pipeline output's images (or frames), else the output itself."""
    for name in ("images", "frames"):
        value = getattr(output, name, None)
        if value is not None:
            return value
    return output


def shape_of(images: object) -> list[int]:
    """The images' shape (a tensor's or array's), [] when it has none (a list of PIL images)."""
    shape = getattr(images, "shape", None)
    if shape is not None:
        return [int(n) for n in shape]
    return [len(images)] if isinstance(images, list) else []


def first_png(images: object) -> bytes:
    """The first image (of a batch, of a video's frames) encoded as PNG."""
    import numpy as np
    from PIL import Image

    first = images
    while isinstance(first, list | tuple):
        first = first[0]
    if isinstance(first, Image.Image):
        picture = first
    else:
        detach = getattr(first, "detach", None)
        array = np.asarray(detach().float().cpu().numpy() if detach else first, dtype=np.float32)
        while array.ndim > 3:  # batch, then frames
            array = array[0]
        if array.ndim == 3 and array.shape[0] in (1, 3, 4) and array.shape[-1] not in (1, 3, 4):
            array = array.transpose(1, 2, 0)  # channels first (torch) to last
        array = np.nan_to_num(array, nan=0.0).clip(0.0, 1.0)
        pixels = (array * 255).round().astype(np.uint8)
        picture = Image.fromarray(pixels.squeeze(-1) if pixels.shape[-1] == 1 else pixels)
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue()
