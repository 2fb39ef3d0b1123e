#include "gpu/gpu_undo_pieces.h"

#include "gpu/fabric_partition_undo.h"
#include "gpu/mig_undo.h"
#include "gpu/mps_undo.h"
#include "gpu/time_slicing_undo.h"
#include "gpu/vfio_undo.h"

namespace nvdra::gpu {

const UndoPieceCodecs& BuiltinUndoPieces() {
  static const UndoPieceCodecs* pieces = new UndoPieceCodecs{
      TimeSlicingUndoCodec(), MpsUndoCodec(), MigUndoCodec(), VfioUndoCodec(), FabricPartitionUndoCodec(),
  };
  return *pieces;
}

Result<GpuUndo> DecodeGpuUndo(const nlohmann::json& j) { return DecodeGpuUndo(j, BuiltinUndoPieces()); }

}  // namespace nvdra::gpu
