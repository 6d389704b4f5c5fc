// FSDP units from a trace's modules (fsdp_modules.h) on module lists shaped
// like Hugging Face's GPT-2 and Llama, whose named_modules() they follow.
#include "core/trace/fsdp_modules.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace habitat {
namespace {

namespace v1 = habitat::v1;

void Add(v1::Trace* trace, const std::string& path, const std::string& class_name,
         int64_t bytes = 0) {
  v1::Module* m = trace->add_modules();
  m->set_path(path);
  m->set_class_name(class_name);
  m->set_parameter_bytes(bytes);
}

// GPT2LMHeadModel with two blocks: embeddings 100 + 10 bytes, blocks of
// 2 + 20 + 30 bytes, ln_f 2, lm_head tied to wte (0).
v1::Trace Gpt2() {
  v1::Trace t;
  Add(&t, "", "GPT2LMHeadModel");
  Add(&t, "transformer", "GPT2Model");
  Add(&t, "transformer.wte", "Embedding", 100);
  Add(&t, "transformer.wpe", "Embedding", 10);
  Add(&t, "transformer.drop", "Dropout");
  Add(&t, "transformer.h", "ModuleList");
  for (const std::string block : {"transformer.h.0", "transformer.h.1"}) {
    Add(&t, block, "GPT2Block");
    Add(&t, block + ".ln_1", "LayerNorm", 2);
    Add(&t, block + ".attn", "GPT2Attention");
    Add(&t, block + ".attn.c_attn", "Conv1D", 20);
    Add(&t, block + ".mlp", "GPT2MLP");
    Add(&t, block + ".mlp.c_fc", "Conv1D", 30);
    Add(&t, block + ".mlp.drop", "Dropout");
  }
  Add(&t, "transformer.ln_f", "LayerNorm", 2);
  Add(&t, "lm_head", "Linear", 0);
  return t;
}

TEST(FsdpModulesTest, EachBlockIsAUnitAndTheRootHoldsTheRest) {
  absl::StatusOr<FsdpModuleUnits> units = FsdpUnitsOfModuleClass(Gpt2().modules(), "GPT2Block");
  ASSERT_TRUE(units.ok()) << units.status();
  EXPECT_EQ(units->root_before, 110);
  EXPECT_THAT(units->wrapped, ::testing::ElementsAre(52, 52));
  EXPECT_EQ(units->root_after, 2);
  // Conv1D instances are units of their own; what lies between them (the
  // layer norms) is the root's.
  units = FsdpUnitsOfModuleClass(Gpt2().modules(), "Conv1D");
  ASSERT_TRUE(units.ok()) << units.status();
  EXPECT_THAT(units->wrapped, ::testing::ElementsAre(20, 30, 20, 30));
  EXPECT_EQ(units->root_before + units->root_after, 110 + 3 * 2);
}

TEST(FsdpModulesTest, TheRepeatedBlockIsTheOutermostRepeatedClass) {
  // Conv1D, LayerNorm and Dropout also repeat, but inside GPT2Block; the
  // two Embeddings repeat outside any block and hold more, but are layers
  // (no modules inside), not blocks.
  EXPECT_EQ(RepeatedBlockClass(Gpt2().modules()), "GPT2Block");
  // Llama: its Linear layers repeat and an untied lm_head lies outside the
  // layers, yet the Linears inside them make Linear a nested class.
  v1::Trace llama;
  Add(&llama, "", "LlamaForCausalLM");
  Add(&llama, "model.embed_tokens", "Embedding", 400);
  Add(&llama, "model.layers", "ModuleList");
  for (const std::string layer : {"model.layers.0", "model.layers.1"}) {
    Add(&llama, layer, "LlamaDecoderLayer");
    Add(&llama, layer + ".self_attn.q_proj", "Linear", 100);
    Add(&llama, layer + ".input_layernorm", "LlamaRMSNorm", 1);
  }
  Add(&llama, "model.norm", "LlamaRMSNorm", 1);
  Add(&llama, "lm_head", "Linear", 400);
  EXPECT_EQ(RepeatedBlockClass(llama.modules()), "LlamaDecoderLayer");
  // No modules, or nothing repeated but containers: no block.
  EXPECT_EQ(RepeatedBlockClass(v1::Trace().modules()), "");
  v1::Trace flat;
  Add(&flat, "", "Net");
  Add(&flat, "layers", "Sequential", 0);
  Add(&flat, "head", "Linear", 8);
  EXPECT_EQ(RepeatedBlockClass(flat.modules()), "");
}

TEST(FsdpModulesTest, ABlockInsideABlockOfItsClassIsPartOfTheOuterOne) {
  v1::Trace t;
  Add(&t, "", "Net");
  Add(&t, "a", "Block", 1);
  Add(&t, "a.inner", "Block", 2);
  Add(&t, "b", "Block", 4);
  absl::StatusOr<FsdpModuleUnits> units = FsdpUnitsOfModuleClass(t.modules(), "Block");
  ASSERT_TRUE(units.ok()) << units.status();
  EXPECT_THAT(units->wrapped, ::testing::ElementsAre(3, 4));
  // A path that only begins like another ("ab" after "a") is not inside it.
  Add(&t, "ab", "Other", 8);
  units = FsdpUnitsOfModuleClass(t.modules(), "Block");
  ASSERT_TRUE(units.ok()) << units.status();
  EXPECT_THAT(units->wrapped, ::testing::ElementsAre(3, 4));
  EXPECT_EQ(units->root_after, 8);
}

TEST(FsdpModulesTest, AMissingClassOrNoModulesSaysWhatThereIs) {
  absl::StatusOr<FsdpModuleUnits> units = FsdpUnitsOfModuleClass(Gpt2().modules(), "GPT2Blok");
  EXPECT_EQ(units.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(units.status().message()),
              ::testing::HasSubstr("Conv1D, Dropout, Embedding, GPT2Attention, GPT2Block"));
  EXPECT_THAT(std::string(units.status().message()),
              ::testing::Not(::testing::HasSubstr("ModuleList")));
  units = FsdpUnitsOfModuleClass(v1::Trace().modules(), "GPT2Block");
  EXPECT_EQ(units.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(units.status().message()), ::testing::HasSubstr("model="));
}

}  // namespace
}  // namespace habitat
