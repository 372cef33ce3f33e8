#pragma once
// What the MPI library lets threads do, for the layers above runtime/ and parallel/ that start threads
// talking MPI (the asynchronous checkpoint writer) without calling MPI themselves.
#include <string>

namespace trlhpc {

struct MpiThreadSupport {
  bool multiple = false;  // MPI_THREAD_MULTIPLE: any thread may call MPI at any time
  std::string level;      // the provided level by name ("MPI_THREAD_FUNNELED", ...), for messages
};

// The thread level MPI was initialised with (MPI_Query_thread). MPI must be initialised.
MpiThreadSupport mpi_thread_support();

}  // namespace trlhpc
