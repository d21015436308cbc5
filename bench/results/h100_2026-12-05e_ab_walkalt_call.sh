# walkalt: scripts/ab-kit's call (prepared 2026-12-05 19:02 UTC). Trees (name rev sha):
#   base main ccbd09a
#   a walkalt 83744db
# run command "bash .dev/walkalt/call.sh", carry [".dev/walkalt"], timeout_s 320
python3 scripts/ab-kit call .dev/walkalt --op ssd --end 300 --order base,a,a,base --rows nemotron-h,m2-2.7b --checks a
