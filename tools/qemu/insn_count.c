/* A QEMU user-mode plugin that counts the guest instructions a program
 * executes: the ARM cost model of docs/benchmarks.md (tools/qemu/
 * arm_cost.sh runs it). Each translated block adds its instruction count to
 * one counter every time it runs (an inline add, no callback per block);
 * at exit the total goes to stderr as "guest instructions: N". The counter
 * is not atomic: run single-threaded programs (pocket -t 1) for exact
 * counts.
 *
 * Built against QEMU's plugin ABI version 1 (QEMU 4.2 to 8.x); Debian does
 * not ship the plugin header, so the few declarations used are written out
 * here. Build: cc -O2 -shared -fPIC -o insn_count.so insn_count.c */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define EXPORT __attribute__((visibility("default")))

typedef uint64_t plugin_id;
struct qemu_plugin_tb;
typedef struct {
  const char *target_name;
  struct {
    int min, cur;
  } version;
  bool system_emulation;
  union {
    struct {
      int smp_vcpus, max_vcpus;
    } system;
  };
} plugin_info;
enum { INLINE_ADD_U64 = 0 };

/* Provided by QEMU. */
void qemu_plugin_register_vcpu_tb_trans_cb(plugin_id id, void (*cb)(plugin_id, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, int op, void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(plugin_id id, void (*cb)(plugin_id, void *), void *userdata);

EXPORT int qemu_plugin_version = 1;

static uint64_t executed;

static void on_translate(plugin_id id, struct qemu_plugin_tb *tb) {
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, INLINE_ADD_U64, &executed, qemu_plugin_tb_n_insns(tb));
}

static void report_at_exit(plugin_id id, void *userdata) {
  (void)id, (void)userdata;
  fprintf(stderr, "guest instructions: %" PRIu64 "\n", executed);
}

EXPORT int qemu_plugin_install(plugin_id id, const plugin_info *info, int argc, char **argv) {
  (void)info, (void)argc, (void)argv;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, report_at_exit, NULL);
  return 0;
}
