# Regenerates the descriptor set of proto/habitat/v1 that habitat_client
# loads and fails if the committed habitat_v1.desc differs, so the Python
# client cannot drift from the protos.
# cmake -DPROTOC=... -DPROTO_DIR=... -DCOMMITTED=... -DOUT=... -P check_descriptor.cmake
execute_process(
  COMMAND ${PROTOC} --include_imports --descriptor_set_out=${OUT} -I ${PROTO_DIR}
          ${PROTO_DIR}/habitat/v1/prediction_service.proto
  RESULT_VARIABLE protoc_result ERROR_VARIABLE protoc_error)
if(NOT protoc_result EQUAL 0)
  message(FATAL_ERROR "protoc failed (${protoc_result}): ${protoc_error}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${COMMITTED}
                RESULT_VARIABLE differ)
if(NOT differ EQUAL 0)
  message(FATAL_ERROR
    "${COMMITTED} does not match proto/ (a .proto changed?). Regenerate it from the source "
    "root with protoc 3.21 (Debian 12's; other protoc versions may encode the same "
    "descriptors differently):\n"
    "  protoc --include_imports --descriptor_set_out=client/python/habitat_client/habitat_v1.desc "
    "-I proto proto/habitat/v1/prediction_service.proto")
endif()
message(STATUS "habitat_v1.desc matches proto/")
