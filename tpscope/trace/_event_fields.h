/* Generated from tpscope/trace/read/fields.py by `python3 -m tpscope.trace.read.fields`:
 * do not edit (tests/trace/test_fields.py checks that it is current). */
#ifndef TPSCOPE_EVENT_FIELDS_H
#define TPSCOPE_EVENT_FIELDS_H

enum {
    A_DEVICE,
    A_STREAM,
    A_CORRELATION,
    A_EXTERNAL_ID,
    A_COLLECTIVE,
    A_IN_NELEMS,
    A_OUT_NELEMS,
    A_DTYPE,
    A_PG_NAME,
    A_GROUP_SIZE,
    A_SEQ,
    A_PG_RANKS,
    A_PG_DESC,
    A_SRC_RANK,
    A_DST_RANK,
    A_GRID,
    A_BLOCK,
    A_INPUT_DIMS,
    A_INPUT_TYPE,
    A_INPUT_STRIDES,
    A_CONCRETE_INPUTS,
    A_WAIT_ON_STREAM,
    A_WAIT_ON_EVENT_CORR,
    A_NAME,
    N_ARG_KEYS
};

/* The argument keys read: name, length, bit (the enum above), kind */
typedef struct {
    const char *name;
    size_t len;
    int bit, kind;
} ArgKey;
static const ArgKey ARG_KEYS[N_ARG_KEYS] = {
    {"device", 6, A_DEVICE, 2},
    {"stream", 6, A_STREAM, 2},
    {"correlation", 11, A_CORRELATION, 0},
    {"External id", 11, A_EXTERNAL_ID, 0},
    {"Collective name", 15, A_COLLECTIVE, 1},
    {"In msg nelems", 13, A_IN_NELEMS, 0},
    {"Out msg nelems", 14, A_OUT_NELEMS, 0},
    {"dtype", 5, A_DTYPE, 1},
    {"Process Group Name", 18, A_PG_NAME, 1},
    {"Group size", 10, A_GROUP_SIZE, 0},
    {"Seq", 3, A_SEQ, 0},
    {"Process Group Ranks", 19, A_PG_RANKS, 5},
    {"Process Group Description", 25, A_PG_DESC, 1},
    {"Src Rank", 8, A_SRC_RANK, 0},
    {"Dst Rank", 8, A_DST_RANK, 0},
    {"grid", 4, A_GRID, 4},
    {"block", 5, A_BLOCK, 4},
    {"Input Dims", 10, A_INPUT_DIMS, 3},
    {"Input type", 10, A_INPUT_TYPE, 3},
    {"Input Strides", 13, A_INPUT_STRIDES, 3},
    {"Concrete Inputs", 15, A_CONCRETE_INPUTS, 3},
    {"wait_on_stream", 14, A_WAIT_ON_STREAM, 0},
    {"wait_on_cuda_event_record_corr_id", 33, A_WAIT_ON_EVENT_CORR, 0},
    {"name", 4, A_NAME, 1},
};

#define MAX_KEY_LEN 33
/* Per key length, the ARG_KEYS of that length, -1 after the last */
static const signed char KEYS_OF_LEN[MAX_KEY_LEN + 1][4] = {
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {10, -1, -1, -1},
    {15, 23, -1, -1},
    {7, 16, -1, -1},
    {0, 1, -1, -1},
    {-1, -1, -1, -1},
    {13, 14, -1, -1},
    {-1, -1, -1, -1},
    {9, 17, 18, -1},
    {2, 3, -1, -1},
    {-1, -1, -1, -1},
    {5, 19, -1, -1},
    {6, 21, -1, -1},
    {4, 20, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {8, -1, -1, -1},
    {11, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {12, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {-1, -1, -1, -1},
    {22, -1, -1, -1},
};

/* The plain arguments kept as dense int64 columns: their arguments and column names */
#define N_PLAIN 4
static const int PLAIN_ARGS[N_PLAIN + 1] = {A_CORRELATION, A_EXTERNAL_ID, A_WAIT_ON_STREAM, A_WAIT_ON_EVENT_CORR, -1};
static const char *PLAIN_NAMES[N_PLAIN + 1] = {"correlation", "external_id", "wait_on_stream", "wait_on_event_corr", 0};
/* The raw arguments kept as dense int32 columns of symbol ids (their text) */
#define N_RAW 4
static const int RAW_ARGS[N_RAW + 1] = {A_INPUT_DIMS, A_INPUT_TYPE, A_INPUT_STRIDES, A_CONCRETE_INPUTS, -1};
static const char *RAW_NAMES[N_RAW + 1] = {"dims_id", "types_id", "strides_id", "concrete_id", 0};

#endif
