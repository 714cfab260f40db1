# Sourced by the studies (converge_study.sh, hawq_converge_study.sh): compare_plans REF NEW POOL
# TEACHER STEM pairs the files of two plans on both test texts (16 x 512) with `gamma compare`,
# into STEM-TEXT.json, unless the plans choose the same type for every module (nothing to
# measure). Needs G (gamma) and data (the shared data directory).
compare_plans() {
  local ref=$1 new=$2 pool=$3 teacher=$4 stem=$5
  if python3 -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))['modules'] != json.load(open(sys.argv[2]))['modules'])" \
       "$ref" "$new"; then
    return 0
  fi
  for text in wiki.test.raw python-eval.txt; do
    [ -f "$stem-$text.json" ] || "$G" compare "$ref" "$new" --pool "$pool" --teacher "$teacher" --text "$data/text/$text" \
      --chunks 16 -t 2 -q -o "$stem-$text.json" > /dev/null
  done
}
