/*
 * tritonserver_api.h -- trident's own declaration of the part of the Triton
 * Inference Server in-process C API ("tritonserver.h") that trident binds.
 *
 * Written for trident from the documented API (API version 1.34, as reported
 * by Triton core 2.51); it is not a copy of NVIDIA's header. Only the types
 * and functions trident uses are declared, with names, enumerator values and
 * signatures matching the official header so that the generated Rust
 * bindings are identical whichever header bindgen reads.
 *
 * build.rs may use the official header instead: point the environment
 * variable TRITON_INCLUDE_DIR at the directory that contains
 * triton/core/tritonserver.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* API version                                                              */
/* ------------------------------------------------------------------------ */

/// Major version of the server API these declarations describe.
#define TRITONSERVER_API_VERSION_MAJOR 1
/// Minor version of the server API these declarations describe.
#define TRITONSERVER_API_VERSION_MINOR 34

/* ------------------------------------------------------------------------ */
/* Opaque handles (only ever used through pointers)                         */
/* ------------------------------------------------------------------------ */

/// Error object; a null pointer means success.
struct TRITONSERVER_Error;
/// An inference request under construction or in flight.
struct TRITONSERVER_InferenceRequest;
/// One response produced for an inference request.
struct TRITONSERVER_InferenceResponse;
/// Tracing state for a request (trident always passes null).
struct TRITONSERVER_InferenceTrace;
/// A serialized JSON document owned by the library.
struct TRITONSERVER_Message;
/// A named, typed value (load parameters, repository name mappings).
struct TRITONSERVER_Parameter;
/// Set of callbacks that provide output tensor memory.
struct TRITONSERVER_ResponseAllocator;
/// An in-process inference server.
struct TRITONSERVER_Server;
/// Settings used to create a server.
struct TRITONSERVER_ServerOptions;

/* ------------------------------------------------------------------------ */
/* Enumerations                                                             */
/* ------------------------------------------------------------------------ */

/// Element type of a tensor.
typedef enum TRITONSERVER_datatype_enum {
  TRITONSERVER_TYPE_INVALID = 0,
  TRITONSERVER_TYPE_BOOL = 1,
  TRITONSERVER_TYPE_UINT8 = 2,
  TRITONSERVER_TYPE_UINT16 = 3,
  TRITONSERVER_TYPE_UINT32 = 4,
  TRITONSERVER_TYPE_UINT64 = 5,
  TRITONSERVER_TYPE_INT8 = 6,
  TRITONSERVER_TYPE_INT16 = 7,
  TRITONSERVER_TYPE_INT32 = 8,
  TRITONSERVER_TYPE_INT64 = 9,
  TRITONSERVER_TYPE_FP16 = 10,
  TRITONSERVER_TYPE_FP32 = 11,
  TRITONSERVER_TYPE_FP64 = 12,
  TRITONSERVER_TYPE_BYTES = 13,
  TRITONSERVER_TYPE_BF16 = 14
} TRITONSERVER_DataType;

/// Where a buffer lives.
typedef enum TRITONSERVER_memorytype_enum {
  TRITONSERVER_MEMORY_CPU = 0,
  TRITONSERVER_MEMORY_CPU_PINNED = 1,
  TRITONSERVER_MEMORY_GPU = 2
} TRITONSERVER_MemoryType;

/// Type tag of a parameter value.
typedef enum TRITONSERVER_parametertype_enum {
  TRITONSERVER_PARAMETER_STRING = 0,
  TRITONSERVER_PARAMETER_INT = 1,
  TRITONSERVER_PARAMETER_BOOL = 2,
  TRITONSERVER_PARAMETER_DOUBLE = 3,
  TRITONSERVER_PARAMETER_BYTES = 4
} TRITONSERVER_ParameterType;

/// Device kind of a model instance group.
typedef enum TRITONSERVER_instancegroupkind_enum {
  TRITONSERVER_INSTANCEGROUPKIND_AUTO = 0,
  TRITONSERVER_INSTANCEGROUPKIND_CPU = 1,
  TRITONSERVER_INSTANCEGROUPKIND_GPU = 2,
  TRITONSERVER_INSTANCEGROUPKIND_MODEL = 3
} TRITONSERVER_InstanceGroupKind;

/// Log severities.
typedef enum TRITONSERVER_loglevel_enum {
  TRITONSERVER_LOG_INFO = 0,
  TRITONSERVER_LOG_WARN = 1,
  TRITONSERVER_LOG_ERROR = 2,
  TRITONSERVER_LOG_VERBOSE = 3
} TRITONSERVER_LogLevel;

/// Timestamp style of log lines.
typedef enum TRITONSERVER_logformat_enum {
  TRITONSERVER_LOG_DEFAULT = 0,
  TRITONSERVER_LOG_ISO8601 = 1
} TRITONSERVER_LogFormat;

/// Category of an error object.
typedef enum TRITONSERVER_errorcode_enum {
  TRITONSERVER_ERROR_UNKNOWN = 0,
  TRITONSERVER_ERROR_INTERNAL = 1,
  TRITONSERVER_ERROR_NOT_FOUND = 2,
  TRITONSERVER_ERROR_INVALID_ARG = 3,
  TRITONSERVER_ERROR_UNAVAILABLE = 4,
  TRITONSERVER_ERROR_UNSUPPORTED = 5,
  TRITONSERVER_ERROR_ALREADY_EXISTS = 6,
  TRITONSERVER_ERROR_CANCELLED = 7
} TRITONSERVER_Error_Code;

/// Bit flags attached to a request (sequence boundaries).
typedef enum tritonserver_requestflag_enum {
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1,
  TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
} TRITONSERVER_RequestFlag;

/// Bit flags passed to the request release callback.
typedef enum tritonserver_requestreleaseflag_enum {
  TRITONSERVER_REQUEST_RELEASE_ALL = 1,
  TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
} TRITONSERVER_RequestReleaseFlag;

/// Bit flags passed to the response callback.
typedef enum tritonserver_responsecompleteflag_enum {
  TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
} TRITONSERVER_ResponseCompleteFlag;

/// How the server manages the models in its repositories.
typedef enum tritonserver_modelcontrolmode_enum {
  TRITONSERVER_MODEL_CONTROL_NONE = 0,
  TRITONSERVER_MODEL_CONTROL_POLL = 1,
  TRITONSERVER_MODEL_CONTROL_EXPLICIT = 2
} TRITONSERVER_ModelControlMode;

/// Scheduling policy of the instance rate limiter.
typedef enum tritonserver_ratelimitmode_enum {
  TRITONSERVER_RATE_LIMIT_OFF = 0,
  TRITONSERVER_RATE_LIMIT_EXEC_COUNT = 1
} TRITONSERVER_RateLimitMode;

/// Bit flags describing how a model batches.
typedef enum tritonserver_batchflag_enum {
  TRITONSERVER_BATCH_UNKNOWN = 1,
  TRITONSERVER_BATCH_FIRST_DIM = 2
} TRITONSERVER_ModelBatchFlag;

/// Bit flags selecting what a model index lists.
typedef enum tritonserver_modelindexflag_enum {
  TRITONSERVER_INDEX_FLAG_READY = 1
} TRITONSERVER_ModelIndexFlag;

/// Bit flags describing how many responses a model sends per request.
typedef enum tritonserver_txn_property_flag_enum {
  TRITONSERVER_TXN_ONE_TO_ONE = 1,
  TRITONSERVER_TXN_DECOUPLED = 2
} TRITONSERVER_ModelTxnPropertyFlag;

/* ------------------------------------------------------------------------ */
/* Version, data types, memory types                                        */
/* ------------------------------------------------------------------------ */

/// Reports the API version implemented by the loaded library.
struct TRITONSERVER_Error* TRITONSERVER_ApiVersion(
    uint32_t* major, uint32_t* minor);

/// Name of a data type ("FP32", ...); static storage, do not free.
const char* TRITONSERVER_DataTypeString(TRITONSERVER_DataType datatype);

/// Parses a data type name; unknown names give TRITONSERVER_TYPE_INVALID.
TRITONSERVER_DataType TRITONSERVER_StringToDataType(const char* dtype);

/// Size of one element in bytes; 0 for BYTES and INVALID.
uint32_t TRITONSERVER_DataTypeByteSize(TRITONSERVER_DataType datatype);

/// Name of a memory type; static storage, do not free.
const char* TRITONSERVER_MemoryTypeString(TRITONSERVER_MemoryType memtype);

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */
/* ------------------------------------------------------------------------ */

/// Creates a parameter, copying the value that 'value' points at.
/// Returns null for BYTES; use TRITONSERVER_ParameterBytesNew for those.
struct TRITONSERVER_Parameter* TRITONSERVER_ParameterNew(
    const char* name, const TRITONSERVER_ParameterType type, const void* value);

/// Creates a BYTES parameter that borrows 'byte_ptr' (not copied).
struct TRITONSERVER_Parameter* TRITONSERVER_ParameterBytesNew(
    const char* name, const void* byte_ptr, const uint64_t size);

/// Frees a parameter.
void TRITONSERVER_ParameterDelete(struct TRITONSERVER_Parameter* parameter);

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/// Creates an error object owned by the caller.
struct TRITONSERVER_Error* TRITONSERVER_ErrorNew(
    TRITONSERVER_Error_Code code, const char* msg);

/// Frees an error object.
void TRITONSERVER_ErrorDelete(struct TRITONSERVER_Error* error);

/// Category of an error.
TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(struct TRITONSERVER_Error* error);

/// Name of an error's code; valid while 'error' lives.
const char* TRITONSERVER_ErrorCodeString(struct TRITONSERVER_Error* error);

/// Text of an error; valid while 'error' lives.
const char* TRITONSERVER_ErrorMessage(struct TRITONSERVER_Error* error);

/* ------------------------------------------------------------------------ */
/* Response allocator                                                       */
/* ------------------------------------------------------------------------ */

/// Callback that provides a buffer for one output tensor and reports where
/// the buffer actually lives; 'buffer_userp' is handed back on release.
typedef struct TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorAllocFn_t)(
    struct TRITONSERVER_ResponseAllocator* allocator, const char* tensor_name,
    size_t byte_size, TRITONSERVER_MemoryType memory_type,
    int64_t memory_type_id, void* userp, void** buffer, void** buffer_userp,
    TRITONSERVER_MemoryType* actual_memory_type,
    int64_t* actual_memory_type_id);

/// Callback that asks for the allocator's preferred memory for an output;
/// 'memory_type' and 'memory_type_id' are in/out.
typedef struct TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorQueryFn_t)(
    struct TRITONSERVER_ResponseAllocator* allocator, void* userp,
    const char* tensor_name, size_t* byte_size,
    TRITONSERVER_MemoryType* memory_type, int64_t* memory_type_id);

/// Callback that frees a buffer once the server no longer refers to it.
typedef struct TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorReleaseFn_t)(
    struct TRITONSERVER_ResponseAllocator* allocator, void* buffer,
    void* buffer_userp, size_t byte_size, TRITONSERVER_MemoryType memory_type,
    int64_t memory_type_id);

/// Optional callback marking the start of a new response's allocations.
typedef struct TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorStartFn_t)(
    struct TRITONSERVER_ResponseAllocator* allocator, void* userp);

/// Creates an allocator from its callbacks ('start_fn' may be null).
struct TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorNew(
    struct TRITONSERVER_ResponseAllocator** allocator,
    TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,
    TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn,
    TRITONSERVER_ResponseAllocatorStartFn_t start_fn);

/// Installs the optional memory-preference query callback.
struct TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorSetQueryFunction(
    struct TRITONSERVER_ResponseAllocator* allocator,
    TRITONSERVER_ResponseAllocatorQueryFn_t query_fn);

/// Frees an allocator.
struct TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorDelete(
    struct TRITONSERVER_ResponseAllocator* allocator);

/* ------------------------------------------------------------------------ */
/* Messages (JSON)                                                          */
/* ------------------------------------------------------------------------ */

/// Builds a message by parsing 'byte_size' bytes of JSON at 'base'.
struct TRITONSERVER_Error* TRITONSERVER_MessageNewFromSerializedJson(
    struct TRITONSERVER_Message** message, const char* base, size_t byte_size);

/// Frees a message.
struct TRITONSERVER_Error* TRITONSERVER_MessageDelete(
    struct TRITONSERVER_Message* message);

/// Exposes a message's JSON text; the buffer stays owned by the message.
struct TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(
    struct TRITONSERVER_Message* message, const char** base, size_t* byte_size);

/* ------------------------------------------------------------------------ */
/* Server options                                                           */
/* ------------------------------------------------------------------------ */

/// Creates an options object with default settings.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsNew(
    struct TRITONSERVER_ServerOptions** options);

/// Frees an options object.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsDelete(
    struct TRITONSERVER_ServerOptions* options);

/// Sets the server's identifying name.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetServerId(
    struct TRITONSERVER_ServerOptions* options, const char* server_id);

/// Adds a model repository (absolute path); may be called repeatedly.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetModelRepositoryPath(
    struct TRITONSERVER_ServerOptions* options,
    const char* model_repository_path);

/// Chooses how models are loaded and unloaded.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetModelControlMode(
    struct TRITONSERVER_ServerOptions* options,
    TRITONSERVER_ModelControlMode mode);

/// Names a model to load at startup (explicit control mode only).
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetStartupModel(
    struct TRITONSERVER_ServerOptions* options, const char* model_name);

/// Requires (true) or relaxes (false) complete model configurations.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetStrictModelConfig(
    struct TRITONSERVER_ServerOptions* options, bool strict);

/// Sets an alternative model configuration file name for all models.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetModelConfigName(
    struct TRITONSERVER_ServerOptions* options, const char* model_config_name);

/// Selects the instance rate-limiting policy.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetRateLimiterMode(
    struct TRITONSERVER_ServerOptions* options,
    TRITONSERVER_RateLimitMode mode);

/// Sets the pinned host memory pool size in bytes.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize(
    struct TRITONSERVER_ServerOptions* options, uint64_t size);

/// Sets the CUDA memory pool size in bytes for one GPU.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize(
    struct TRITONSERVER_ServerOptions* options, int gpu_device, uint64_t size);

/// Sets the lowest CUDA compute capability the server will use.
struct TRITONSERVER_Error*
TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability(
    struct TRITONSERVER_ServerOptions* options, double cc);

/// Whether server creation fails when any model fails to initialize.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetExitOnError(
    struct TRITONSERVER_ServerOptions* options, bool exit);

/// Whether readiness requires every model to be ready.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetStrictReadiness(
    struct TRITONSERVER_ServerOptions* options, bool strict);

/// Seconds to wait for in-flight work when the server stops.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetExitTimeout(
    struct TRITONSERVER_ServerOptions* options, unsigned int timeout);

/// Number of buffer manager threads.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetBufferManagerThreadCount(
    struct TRITONSERVER_ServerOptions* options, unsigned int thread_count);

/// Number of threads that load models concurrently.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetModelLoadThreadCount(
    struct TRITONSERVER_ServerOptions* options, unsigned int thread_count);

/// Number of times a failed model load is retried.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetModelLoadRetryCount(
    struct TRITONSERVER_ServerOptions* options, unsigned int retry_count);

/// Allows equal model names in different repositories (namespaces).
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetModelNamespacing(
    struct TRITONSERVER_ServerOptions* options, bool enable_namespace);

/// Sends the log to a file; an empty name means the console.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetLogFile(
    struct TRITONSERVER_ServerOptions* options, const char* file);

/// Turns info-level logging on or off.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetLogInfo(
    struct TRITONSERVER_ServerOptions* options, bool log);

/// Turns warning-level logging on or off.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetLogWarn(
    struct TRITONSERVER_ServerOptions* options, bool log);

/// Turns error-level logging on or off.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetLogError(
    struct TRITONSERVER_ServerOptions* options, bool log);

/// Chooses the log line format.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetLogFormat(
    struct TRITONSERVER_ServerOptions* options,
    const TRITONSERVER_LogFormat format);

/// Sets the verbose log level; 0 turns verbose logging off.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetLogVerbose(
    struct TRITONSERVER_ServerOptions* options, int level);

/// Turns metrics collection on or off.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetMetrics(
    struct TRITONSERVER_ServerOptions* options, bool metrics);

/// Turns GPU metrics on or off (needs metrics enabled too).
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetGpuMetrics(
    struct TRITONSERVER_ServerOptions* options, bool gpu_metrics);

/// Turns CPU metrics on or off (needs metrics enabled too).
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetCpuMetrics(
    struct TRITONSERVER_ServerOptions* options, bool cpu_metrics);

/// Milliseconds between metric refreshes.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetMetricsInterval(
    struct TRITONSERVER_ServerOptions* options, uint64_t metrics_interval_ms);

/// Directory searched for backend shared libraries.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetBackendDirectory(
    struct TRITONSERVER_ServerOptions* options, const char* backend_dir);

/// Directory searched for repository agent shared libraries.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetRepoAgentDirectory(
    struct TRITONSERVER_ServerOptions* options, const char* repoagent_dir);

/// Refuses model loads on a device once its memory use passes 'fraction'
/// (only TRITONSERVER_INSTANCEGROUPKIND_GPU is supported).
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit(
    struct TRITONSERVER_ServerOptions* options,
    const TRITONSERVER_InstanceGroupKind kind, const int device_id,
    const double fraction);

/// Sets one configuration key for a named backend.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetBackendConfig(
    struct TRITONSERVER_ServerOptions* options, const char* backend_name,
    const char* setting, const char* value);

/// Sets one key of a named host policy.
struct TRITONSERVER_Error* TRITONSERVER_ServerOptionsSetHostPolicy(
    struct TRITONSERVER_ServerOptions* options, const char* policy_name,
    const char* setting, const char* value);

/* ------------------------------------------------------------------------ */
/* Inference requests                                                       */
/* ------------------------------------------------------------------------ */

/// Callback through which the server hands a request back to its owner;
/// 'flags' is a mask of TRITONSERVER_RequestReleaseFlag.
typedef void (*TRITONSERVER_InferenceRequestReleaseFn_t)(
    struct TRITONSERVER_InferenceRequest* request, const uint32_t flags,
    void* userp);

/// Callback that delivers a response (owned by the callee; may be null on
/// the final call); 'flags' is a mask of TRITONSERVER_ResponseCompleteFlag.
typedef void (*TRITONSERVER_InferenceResponseCompleteFn_t)(
    struct TRITONSERVER_InferenceResponse* response, const uint32_t flags,
    void* userp);

/// Creates a request for a model; version -1 lets the server choose.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestNew(
    struct TRITONSERVER_InferenceRequest** inference_request,
    struct TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version);

/// Frees a request that the server has released.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestDelete(
    struct TRITONSERVER_InferenceRequest* inference_request);

/// Reads the request ID (owned by the request).
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestId(
    struct TRITONSERVER_InferenceRequest* inference_request, const char** id);

/// Sets the request ID.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetId(
    struct TRITONSERVER_InferenceRequest* inference_request, const char* id);

/// Reads the TRITONSERVER_RequestFlag mask.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestFlags(
    struct TRITONSERVER_InferenceRequest* inference_request, uint32_t* flags);

/// Sets the TRITONSERVER_RequestFlag mask.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetFlags(
    struct TRITONSERVER_InferenceRequest* inference_request, uint32_t flags);

/// Reads a numeric correlation ID (fails if the ID is a string).
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestCorrelationId(
    struct TRITONSERVER_InferenceRequest* inference_request,
    uint64_t* correlation_id);

/// Reads a string correlation ID (fails if the ID is numeric).
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestCorrelationIdString(
    struct TRITONSERVER_InferenceRequest* inference_request,
    const char** correlation_id);

/// Sets a numeric correlation ID; 0 means none.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationId(
    struct TRITONSERVER_InferenceRequest* inference_request,
    uint64_t correlation_id);

/// Sets a string correlation ID.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationIdString(
    struct TRITONSERVER_InferenceRequest* inference_request,
    const char* correlation_id);

/// Asks the server to stop work on an in-flight request (best effort).
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestCancel(
    struct TRITONSERVER_InferenceRequest* inference_request);

/// Reports whether the request has been cancelled.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestIsCancelled(
    struct TRITONSERVER_InferenceRequest* inference_request,
    bool* is_cancelled);

/// Reads the priority; 0 means the model's default.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestPriorityUInt64(
    struct TRITONSERVER_InferenceRequest* inference_request,
    uint64_t* priority);

/// Sets the priority; 0 means the model's default.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetPriorityUInt64(
    struct TRITONSERVER_InferenceRequest* inference_request, uint64_t priority);

/// Reads the timeout in microseconds; 0 means none.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestTimeoutMicroseconds(
    struct TRITONSERVER_InferenceRequest* inference_request,
    uint64_t* timeout_us);

/// Sets the timeout in microseconds; 0 means none.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(
    struct TRITONSERVER_InferenceRequest* inference_request,
    uint64_t timeout_us);

/// Declares an input tensor by name, type and shape.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddInput(
    struct TRITONSERVER_InferenceRequest* inference_request, const char* name,
    const TRITONSERVER_DataType datatype, const int64_t* shape,
    uint64_t dim_count);

/// Declares the single raw input whose type and shape come from the model.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddRawInput(
    struct TRITONSERVER_InferenceRequest* inference_request, const char* name);

/// Removes one input.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveInput(
    struct TRITONSERVER_InferenceRequest* inference_request, const char* name);

/// Removes every input.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllInputs(
    struct TRITONSERVER_InferenceRequest* inference_request);

/// Appends a data buffer to an input; the buffer must stay valid until the
/// input is removed or the request is deleted.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputData(
    struct TRITONSERVER_InferenceRequest* inference_request, const char* name,
    const void* base, size_t byte_size, TRITONSERVER_MemoryType memory_type,
    int64_t memory_type_id);

/// Drops all data buffers of an input.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveAllInputData(
    struct TRITONSERVER_InferenceRequest* inference_request, const char* name);

/// Asks for an output tensor by name.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddRequestedOutput(
    struct TRITONSERVER_InferenceRequest* inference_request, const char* name);

/// Withdraws one requested output.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestRemoveRequestedOutput(
    struct TRITONSERVER_InferenceRequest* inference_request, const char* name);

/// Withdraws every requested output.
struct TRITONSERVER_Error*
TRITONSERVER_InferenceRequestRemoveAllRequestedOutputs(
    struct TRITONSERVER_InferenceRequest* inference_request);

/// Sets the callback that returns ownership of the request.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetReleaseCallback(
    struct TRITONSERVER_InferenceRequest* inference_request,
    TRITONSERVER_InferenceRequestReleaseFn_t request_release_fn,
    void* request_release_userp);

/// Sets the output allocator and the callback that receives responses.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetResponseCallback(
    struct TRITONSERVER_InferenceRequest* inference_request,
    struct TRITONSERVER_ResponseAllocator* response_allocator,
    void* response_allocator_userp,
    TRITONSERVER_InferenceResponseCompleteFn_t response_fn,
    void* response_userp);

/// Attaches a string parameter to the request.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetStringParameter(
    struct TRITONSERVER_InferenceRequest* request, const char* key,
    const char* value);

/// Attaches an integer parameter to the request.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetIntParameter(
    struct TRITONSERVER_InferenceRequest* request, const char* key,
    const int64_t value);

/// Attaches a boolean parameter to the request.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetBoolParameter(
    struct TRITONSERVER_InferenceRequest* request, const char* key,
    const bool value);

/// Attaches a floating-point parameter to the request.
struct TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetDoubleParameter(
    struct TRITONSERVER_InferenceRequest* request, const char* key,
    const double value);

/* ------------------------------------------------------------------------ */
/* Inference responses                                                      */
/* ------------------------------------------------------------------------ */

/// Frees a response (and, through the allocator, its output buffers).
struct TRITONSERVER_Error* TRITONSERVER_InferenceResponseDelete(
    struct TRITONSERVER_InferenceResponse* inference_response);

/// The response's status: null on success, otherwise an error that the
/// response owns (do not delete it).
struct TRITONSERVER_Error* TRITONSERVER_InferenceResponseError(
    struct TRITONSERVER_InferenceResponse* inference_response);

/// Name and version of the model that produced the response.
struct TRITONSERVER_Error* TRITONSERVER_InferenceResponseModel(
    struct TRITONSERVER_InferenceResponse* inference_response,
    const char** model_name, int64_t* model_version);

/// ID of the request this response answers.
struct TRITONSERVER_Error* TRITONSERVER_InferenceResponseId(
    struct TRITONSERVER_InferenceResponse* inference_response,
    const char** request_id);

/// Number of parameters carried by the response.
struct TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameterCount(
    struct TRITONSERVER_InferenceResponse* inference_response, uint32_t* count);

/// One response parameter; 'vvalue' must be read according to 'type'.
struct TRITONSERVER_Error* TRITONSERVER_InferenceResponseParameter(
    struct TRITONSERVER_InferenceResponse* inference_response,
    const uint32_t index, const char** name, TRITONSERVER_ParameterType* type,
    const void** vvalue);

/// Number of output tensors in the response.
struct TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutputCount(
    struct TRITONSERVER_InferenceResponse* inference_response, uint32_t* count);

/// Everything about one output tensor; all values are owned by the
/// response and stay valid until it is deleted.
struct TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutput(
    struct TRITONSERVER_InferenceResponse* inference_response,
    const uint32_t index, const char** name, TRITONSERVER_DataType* datatype,
    const int64_t** shape, uint64_t* dim_count, const void** base,
    size_t* byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id, void** userp);

/// Class label for 'class_index' of an output, or null when there is none.
struct TRITONSERVER_Error*
TRITONSERVER_InferenceResponseOutputClassificationLabel(
    struct TRITONSERVER_InferenceResponse* inference_response,
    const uint32_t index, const size_t class_index, const char** label);

/* ------------------------------------------------------------------------ */
/* Server                                                                   */
/* ------------------------------------------------------------------------ */

/// Creates and starts a server from an options object.
struct TRITONSERVER_Error* TRITONSERVER_ServerNew(
    struct TRITONSERVER_Server** server,
    struct TRITONSERVER_ServerOptions* options);

/// Stops (if needed) and frees a server.
struct TRITONSERVER_Error* TRITONSERVER_ServerDelete(
    struct TRITONSERVER_Server* server);

/// Stops a server; it cannot be started again.
struct TRITONSERVER_Error* TRITONSERVER_ServerStop(
    struct TRITONSERVER_Server* server);

/// Changes the exit timeout, in seconds, of a running server.
struct TRITONSERVER_Error* TRITONSERVER_ServerSetExitTimeout(
    struct TRITONSERVER_Server* server, unsigned int timeout);

/// Adds a model repository at run time; 'name_mapping' maps directory
/// names to model names (not allowed in poll mode).
struct TRITONSERVER_Error* TRITONSERVER_ServerRegisterModelRepository(
    struct TRITONSERVER_Server* server, const char* repository_path,
    const struct TRITONSERVER_Parameter** name_mapping,
    const uint32_t mapping_count);

/// Removes a model repository at run time (not allowed in poll mode).
struct TRITONSERVER_Error* TRITONSERVER_ServerUnregisterModelRepository(
    struct TRITONSERVER_Server* server, const char* repository_path);

/// Rescans the repositories and applies changes (poll mode).
struct TRITONSERVER_Error* TRITONSERVER_ServerPollModelRepository(
    struct TRITONSERVER_Server* server);

/// Liveness of the server.
struct TRITONSERVER_Error* TRITONSERVER_ServerIsLive(
    struct TRITONSERVER_Server* server, bool* live);

/// Readiness of the server.
struct TRITONSERVER_Error* TRITONSERVER_ServerIsReady(
    struct TRITONSERVER_Server* server, bool* ready);

/// Readiness of one model version (-1: server's choice of version).
struct TRITONSERVER_Error* TRITONSERVER_ServerModelIsReady(
    struct TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, bool* ready);

/// TRITONSERVER_ModelBatchFlag mask of a model, plus optional extra data.
struct TRITONSERVER_Error* TRITONSERVER_ServerModelBatchProperties(
    struct TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, uint32_t* flags, void** voidp);

/// TRITONSERVER_ModelTxnPropertyFlag mask of a model, plus optional data.
struct TRITONSERVER_Error* TRITONSERVER_ServerModelTransactionProperties(
    struct TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, uint32_t* txn_flags, void** voidp);

/// Server metadata as a JSON message owned by the caller.
struct TRITONSERVER_Error* TRITONSERVER_ServerMetadata(
    struct TRITONSERVER_Server* server,
    struct TRITONSERVER_Message** server_metadata);

/// Model metadata as a JSON message owned by the caller.
struct TRITONSERVER_Error* TRITONSERVER_ServerModelMetadata(
    struct TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, struct TRITONSERVER_Message** model_metadata);

/// Model statistics as a JSON message owned by the caller; an empty name
/// means all models.
struct TRITONSERVER_Error* TRITONSERVER_ServerModelStatistics(
    struct TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, struct TRITONSERVER_Message** model_stats);

/// Model configuration as a JSON message owned by the caller
/// ('config_version' must currently be 1).
struct TRITONSERVER_Error* TRITONSERVER_ServerModelConfig(
    struct TRITONSERVER_Server* server, const char* model_name,
    const int64_t model_version, const uint32_t config_version,
    struct TRITONSERVER_Message** model_config);

/// Index of the repositories' models as a JSON message owned by the
/// caller; 'flags' is a TRITONSERVER_ModelIndexFlag mask.
struct TRITONSERVER_Error* TRITONSERVER_ServerModelIndex(
    struct TRITONSERVER_Server* server, uint32_t flags,
    struct TRITONSERVER_Message** model_index);

/// Loads or reloads a model; returns once the load has finished.
struct TRITONSERVER_Error* TRITONSERVER_ServerLoadModel(
    struct TRITONSERVER_Server* server, const char* model_name);

/// Like TRITONSERVER_ServerLoadModel with load parameters (e.g. "config").
struct TRITONSERVER_Error* TRITONSERVER_ServerLoadModelWithParameters(
    struct TRITONSERVER_Server* server, const char* model_name,
    const struct TRITONSERVER_Parameter** parameters,
    const uint64_t parameter_count);

/// Starts unloading a model; does not wait for it to finish.
struct TRITONSERVER_Error* TRITONSERVER_ServerUnloadModel(
    struct TRITONSERVER_Server* server, const char* model_name);

/// Starts unloading a model and the models loaded along with it.
struct TRITONSERVER_Error* TRITONSERVER_ServerUnloadModelAndDependents(
    struct TRITONSERVER_Server* server, const char* model_name);

/// Submits a request; on success the server owns it until the release
/// callback runs. 'trace' may be null and is always taken over.
struct TRITONSERVER_Error* TRITONSERVER_ServerInferAsync(
    struct TRITONSERVER_Server* server,
    struct TRITONSERVER_InferenceRequest* inference_request,
    struct TRITONSERVER_InferenceTrace* trace);

#ifdef __cplusplus
}
#endif
