// The pieces of the GPU undo record the built-in plug-ins write, in one
// list: with them a record decodes without a kind (the sweeps, the fuzz
// target, the checkpoint codec). A plug-in with a piece adds its codec here
// and in its registration (gpu_handlers.cc).
#pragma once

#include "gpu/gpu_undo.h"

namespace nvdra::gpu {

const UndoPieceCodecs& BuiltinUndoPieces();

// DecodeGpuUndo with the built-in pieces.
Result<GpuUndo> DecodeGpuUndo(const nlohmann::json& j);

}  // namespace nvdra::gpu
