/*
 * tritonbackend_api.h -- trident's own declaration of the part of Triton's
 * backend API ("tritonbackend.h") that trident's native backend uses.
 *
 * Written for trident from the documented API (TRITONBACKEND API 1.19, as
 * shipped with Triton core 2.51); it is not a copy of NVIDIA's header. Names,
 * enumerator values and signatures match the official header. The server
 * types it needs (errors, data and memory types, messages) come from the
 * server declarations trident itself binds.
 *
 * The entry points the backend defines (TRITONBACKEND_ModelInitialize and
 * the rest) are not declared here: the Rust crate defines them, with the
 * signatures the official header gives them.
 */
#pragma once

#include "../src/engine/triton/tritonserver_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Major version of the backend API these declarations describe.
#define TRITONBACKEND_API_VERSION_MAJOR 1
/// Minor version of the backend API these declarations describe.
#define TRITONBACKEND_API_VERSION_MINOR 19

/* Opaque handles, owned by Triton unless a function says otherwise. */

/// The backend (one per process per backend name).
struct TRITONBACKEND_Backend;
/// A model (one per loaded model version).
struct TRITONBACKEND_Model;
/// One instance of a model (instance_group count).
struct TRITONBACKEND_ModelInstance;
/// A request handed to an instance's execute.
struct TRITONBACKEND_Request;
/// An input tensor of a request.
struct TRITONBACKEND_Input;
/// An output tensor of a response.
struct TRITONBACKEND_Output;
/// A response being built.
struct TRITONBACKEND_Response;
/// Creates responses for one request after the request is released.
struct TRITONBACKEND_ResponseFactory;

/// How a model's files reach the backend.
typedef enum TRITONBACKEND_artifacttype_enum {
  TRITONBACKEND_ARTIFACT_FILESYSTEM
} TRITONBACKEND_ArtifactType;

/* Version */

struct TRITONSERVER_Error* TRITONBACKEND_ApiVersion(uint32_t* major,
                                                   uint32_t* minor);

/* Inputs and outputs */

struct TRITONSERVER_Error* TRITONBACKEND_InputProperties(
    struct TRITONBACKEND_Input* input, const char** name,
    TRITONSERVER_DataType* datatype, const int64_t** shape,
    uint32_t* dims_count, uint64_t* byte_size, uint32_t* buffer_count);

struct TRITONSERVER_Error* TRITONBACKEND_InputBuffer(
    struct TRITONBACKEND_Input* input, const uint32_t index,
    const void** buffer, uint64_t* buffer_byte_size,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id);

struct TRITONSERVER_Error* TRITONBACKEND_OutputBuffer(
    struct TRITONBACKEND_Output* output, void** buffer,
    const uint64_t buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id);

/* Requests */

struct TRITONSERVER_Error* TRITONBACKEND_RequestIsCancelled(
    struct TRITONBACKEND_Request* request, bool* is_cancelled);

struct TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationId(
    struct TRITONBACKEND_Request* request, uint64_t* id);

struct TRITONSERVER_Error* TRITONBACKEND_RequestFlags(
    struct TRITONBACKEND_Request* request, uint32_t* flags);

struct TRITONSERVER_Error* TRITONBACKEND_RequestInputCount(
    struct TRITONBACKEND_Request* request, uint32_t* count);

struct TRITONSERVER_Error* TRITONBACKEND_RequestInputByIndex(
    struct TRITONBACKEND_Request* request, const uint32_t index,
    struct TRITONBACKEND_Input** input);

struct TRITONSERVER_Error* TRITONBACKEND_RequestOutputCount(
    struct TRITONBACKEND_Request* request, uint32_t* count);

struct TRITONSERVER_Error* TRITONBACKEND_RequestOutputName(
    struct TRITONBACKEND_Request* request, const uint32_t index,
    const char** output_name);

struct TRITONSERVER_Error* TRITONBACKEND_RequestRelease(
    struct TRITONBACKEND_Request* request, uint32_t release_flags);

/* Responses */

struct TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryNew(
    struct TRITONBACKEND_ResponseFactory** factory,
    struct TRITONBACKEND_Request* request);

struct TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryDelete(
    struct TRITONBACKEND_ResponseFactory* factory);

struct TRITONSERVER_Error* TRITONBACKEND_ResponseFactorySendFlags(
    struct TRITONBACKEND_ResponseFactory* factory, const uint32_t send_flags);

struct TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryIsCancelled(
    struct TRITONBACKEND_ResponseFactory* factory, bool* is_cancelled);

struct TRITONSERVER_Error* TRITONBACKEND_ResponseNew(
    struct TRITONBACKEND_Response** response,
    struct TRITONBACKEND_Request* request);

struct TRITONSERVER_Error* TRITONBACKEND_ResponseNewFromFactory(
    struct TRITONBACKEND_Response** response,
    struct TRITONBACKEND_ResponseFactory* factory);

struct TRITONSERVER_Error* TRITONBACKEND_ResponseDelete(
    struct TRITONBACKEND_Response* response);

struct TRITONSERVER_Error* TRITONBACKEND_ResponseOutput(
    struct TRITONBACKEND_Response* response,
    struct TRITONBACKEND_Output** output, const char* name,
    const TRITONSERVER_DataType datatype, const int64_t* shape,
    const uint32_t dims_count);

struct TRITONSERVER_Error* TRITONBACKEND_ResponseSend(
    struct TRITONBACKEND_Response* response, const uint32_t send_flags,
    struct TRITONSERVER_Error* error);

/* Backends */

struct TRITONSERVER_Error* TRITONBACKEND_BackendName(
    struct TRITONBACKEND_Backend* backend, const char** name);

/* Models and instances */

struct TRITONSERVER_Error* TRITONBACKEND_ModelBackend(
    struct TRITONBACKEND_Model* model, struct TRITONBACKEND_Backend** backend);

struct TRITONSERVER_Error* TRITONBACKEND_ModelRepository(
    struct TRITONBACKEND_Model* model, TRITONBACKEND_ArtifactType* artifact_type,
    const char** location);

struct TRITONSERVER_Error* TRITONBACKEND_ModelAutoCompleteConfig(
    struct TRITONBACKEND_Model* model, bool* auto_complete_config);

struct TRITONSERVER_Error* TRITONBACKEND_ModelSetConfig(
    struct TRITONBACKEND_Model* model, const uint32_t config_version,
    struct TRITONSERVER_Message* model_config);

struct TRITONSERVER_Error* TRITONBACKEND_ModelInstanceKind(
    struct TRITONBACKEND_ModelInstance* instance,
    TRITONSERVER_InstanceGroupKind* kind);

struct TRITONSERVER_Error* TRITONBACKEND_ModelName(
    struct TRITONBACKEND_Model* model, const char** name);

struct TRITONSERVER_Error* TRITONBACKEND_ModelVersion(
    struct TRITONBACKEND_Model* model, uint64_t* version);

struct TRITONSERVER_Error* TRITONBACKEND_ModelConfig(
    struct TRITONBACKEND_Model* model, const uint32_t config_version,
    struct TRITONSERVER_Message** model_config);

struct TRITONSERVER_Error* TRITONBACKEND_ModelState(
    struct TRITONBACKEND_Model* model, void** state);

struct TRITONSERVER_Error* TRITONBACKEND_ModelSetState(
    struct TRITONBACKEND_Model* model, void* state);

struct TRITONSERVER_Error* TRITONBACKEND_ModelInstanceModel(
    struct TRITONBACKEND_ModelInstance* instance,
    struct TRITONBACKEND_Model** model);

struct TRITONSERVER_Error* TRITONBACKEND_ModelInstanceState(
    struct TRITONBACKEND_ModelInstance* instance, void** state);

struct TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSetState(
    struct TRITONBACKEND_ModelInstance* instance, void* state);

struct TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(
    struct TRITONBACKEND_ModelInstance* instance,
    struct TRITONBACKEND_Request* request, const bool success,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns,
    const uint64_t compute_end_ns, const uint64_t exec_end_ns);

struct TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(
    struct TRITONBACKEND_ModelInstance* instance, const uint64_t batch_size,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns,
    const uint64_t compute_end_ns, const uint64_t exec_end_ns);

#ifdef __cplusplus
}
#endif
