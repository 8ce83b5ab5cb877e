#!/usr/bin/env bash
# Mutation testing of the transactional core and the store's recovery (docs/mutation-testing.md).
# mutmut mutates the modules listed under [tool.mutmut] in pyproject.toml, runs the fast test subset listed
# there against each mutant, then scripts/mutation_score.py prints the score per module, leaving out the
# survivors judged equivalent (docs/mutation-survivors.md). Exit code 1 if a module scores under 95 %.
#
#   scripts/mutate.sh                   every module (about an hour on two busy cores)
#   scripts/mutate.sh scan op_batcher   only these modules (file names without .py)
#   MUTATE_FRESH=1 scripts/mutate.sh    forget earlier results (mutants/) first
# mutmut keeps each mutant's result in mutants/ and tests only mutants it has no result for; this script
# also re-tests the earlier survivors, since the tests may have changed since, and has mutmut record
# again which tests reach which function.
TXMQ_EXTRAS="test,mutation"
source "$(dirname "$0")/bootstrap.sh"

if [ -n "${MUTATE_FRESH:-}" ]; then
    rm -rf mutants
fi
patterns=()
if [ "$#" -gt 0 ]; then
    read -r -a patterns <<< "$(python scripts/mutation_score.py --pattern "$@")"
fi
rm -f mutants/mutmut-stats.json  # which tests reach which function: recorded again for today's tests
echo "== mutmut run ${patterns[*]:-(every module)}" >&2
mutmut run "${patterns[@]}" >&2 || true  # its own exit code says nothing about the score
read -r -a survivors <<< "$(python scripts/mutation_score.py --survivors "$@")"
if [ "${#survivors[@]}" -gt 0 ]; then
    echo "== mutmut run: the ${#survivors[@]} survivors again, against today's tests" >&2
    mutmut run "${survivors[@]}" >&2 || true
fi
echo "== score per module" >&2
python scripts/mutation_score.py "$@"
