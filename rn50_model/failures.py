"""How a failed run is named: out of memory (a result, as in DLPerf's tables) or an error.

Allocators say "out of memory" in many words: torch's CUDA allocator raises its own type,
the CPU allocator "can't allocate memory", DALI "Can't allocate 6422528 bytes on device 0" or
"CUDA allocation failed", cuBLAS and cuDNN their status ALLOC_FAILED (a handle or workspace they
allocate themselves, outside torch's allocator, at the memory boundary of a max-batch search).
One list of those words serves the worker and the data backends.
"""
from __future__ import annotations

# Not CUBLAS_STATUS_NOT_INITIALIZED: often memory, but also a broken driver or library, so it
# stays an error. cuDNN has no status of its own for too small a workspace: torch allocates the
# workspace through its allocator and, when that fails, falls back to an algorithm needing less.
OUT_OF_MEMORY_MARKS = ("out of memory", "can't allocate", "cannot allocate memory",
                       "not enough memory", "cuda allocation failed",
                       "cudaerrormemoryallocation", "cublas_status_alloc_failed",
                       "cudnn_status_alloc_failed")


class DataOutOfMemory(MemoryError):
    """The input pipeline (DALI) could not allocate its buffers."""


def mentions_out_of_memory(text: str) -> bool:
    text = text.lower()
    return any(mark in text for mark in OUT_OF_MEMORY_MARKS)


# oneDNN reports a buffer it could not map while building a convolution ("create"), or a
# scratchpad it could not allocate while running one ("execute", seen in a backward pass on CI),
# this way. Under a memory limit (the worker's --memory-limit-bytes) that is the limit reached:
# the same run fails with the CPU allocator's "can't allocate" one batch size up or down. Without
# a limit it may be anything, so it stays an error there.
LIMITED_OUT_OF_MEMORY_MARKS = ("could not create a primitive", "could not execute a primitive")


def is_out_of_memory(error: BaseException, memory_limited: bool = False) -> bool:
    if memory_limited and any(mark in str(error).lower() for mark in LIMITED_OUT_OF_MEMORY_MARKS):
        return True
    if isinstance(error, MemoryError):
        return True
    try:
        import torch
    except ImportError:
        pass
    else:
        if isinstance(error, torch.cuda.OutOfMemoryError):
            return True
    return mentions_out_of_memory(str(error))


def first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
