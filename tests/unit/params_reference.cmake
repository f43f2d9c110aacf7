# The committed parameter reference is what the binary prints: runs `orbis params` and
# compares its output byte for byte with params/README.md (run by CTest as
# unit/params_reference; tests/unit/test_params checks the schema's table, this the command).
#   cmake -DORBIS=path/to/orbis -DREFERENCE=params/README.md -DOUT=file -P params_reference.cmake
foreach(var ORBIS REFERENCE OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "params_reference.cmake: -D${var}=... is required")
  endif()
endforeach()
execute_process(COMMAND ${ORBIS} params OUTPUT_FILE ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "`${ORBIS} params` failed (exit ${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${REFERENCE} RESULT_VARIABLE differ)
if(differ)
  # Show what changed (diff is in every Debian base system; without it the message alone).
  find_program(DIFF diff)
  set(changes "")
  if(DIFF)
    execute_process(COMMAND ${DIFF} -u ${REFERENCE} ${OUT} OUTPUT_VARIABLE changes)
  endif()
  message(FATAL_ERROR "${REFERENCE} is not what `orbis params` prints:\n${changes}\n"
                      "Regenerate it from the source root: ./build/orbis params > params/README.md")
endif()
message(STATUS "${REFERENCE} is what `orbis params` prints")
