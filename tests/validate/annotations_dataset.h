// The small dataset that the annotations tests (test_annotations.cpp) and the
// annotations fuzz target (tests/fuzz/fuzz_annotations.cpp) annotate.
#pragma once

namespace parasim_test {

// Three small inference points: two from one page, one from another that
// names its stack itself.
inline const char* const kAnnotationsDataset = R"(points:
- id: page-a-1
  kind: inference
  source: "page A, 'Peak Throughput - H100'"
  hardware: {gpu: h100-sxm, gpus: 1}
  model: &model {layers: 2, hidden: 1024, heads: 16, kv_heads: 2, ffn: 2816, ffn_kind: swiglu, vocab: 32000}
  workload: &workload {batch: 8, prompt_tokens: 128, output_tokens: 64, dtype: fp16}
  measured: {metric: tokens_per_s, value: 1000}
- id: page-a-2
  kind: inference
  source: "page A, 'Peak Throughput - A100'"
  hardware: {gpu: a100-sxm-80gb, gpus: 1}
  model: *model
  workload: *workload
  measured: {metric: tokens_per_s, value: 1000}
- id: page-b
  kind: inference
  source: "page B"
  hardware: {gpu: a100-sxm-80gb, gpus: 1}
  model: *model
  workload: *workload
  measured: {metric: tokens_per_s, value: 1000}
  software: {name: tensorrt-llm, version: '0.6.1'}
)";

}  // namespace parasim_test
