# fish completion for thumbpipe(1). Installed in share/fish/vendor_completions.d.
# Its option lists must match each command's --help (a test compares them).

set -l commands run scan inspect extract contact-sheet merge report pipeline help
set -l formats jpeg png webp heif tiff gif jp2k jxl svg pdf magick openexr fits rad ppm analyze mat vips csv matrix openslide

function __thumbpipe_formats
    # A comma-separated list: offer each name after what is typed so far.
    set -l token (commandline -ct)
    set -l head (string replace -r '[^,]*$' '' -- $token)
    for name in $argv
        echo $head$name
    end
end

complete -c thumbpipe -f
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -l help -d 'print help'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -l version -d 'print the version, revision and libvips version'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -a run -d 'process a manifest or folder into an output folder'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -a scan -d 'write a manifest of the images in folders'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -a inspect -d 'list the items of an items.archive'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -a extract -d 'write the thumbnails as PNG files'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -a contact-sheet -d 'draw all thumbnails in a grid'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -a merge -d 'join the partial outputs of run --shard'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -a report -d 'draw a run\'s report as an HTML page'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -a pipeline -d 'print or list pipeline settings'
complete -c thumbpipe -n "not __fish_seen_subcommand_from $commands" -a help -d 'print help'

# Every command.
complete -c thumbpipe -n "__fish_seen_subcommand_from $commands" -s q -l quiet -d 'less on standard error'
complete -c thumbpipe -n "__fish_seen_subcommand_from $commands" -s h -l help -d 'print help'

# run
set -l run "__fish_seen_subcommand_from run"
complete -c thumbpipe -n $run -F
# BEGIN generated run options: fish (make docs writes this from the option table)
complete -c thumbpipe -n $run -s o -l output -r -F -d 'output folder'
complete -c thumbpipe -n $run -s r -l recursive -d 'with DIR: its sub-folders too'
complete -c thumbpipe -n $run -l ext -x -d 'with DIR: only these extensions'
complete -c thumbpipe -n $run -l pipeline -r -a '(thumbpipe pipeline list -q 2>/dev/null | cut -f1)' -d 'pipeline settings'
complete -c thumbpipe -n $run -s j -l jobs -x -d 'worker processes'
complete -c thumbpipe -n $run -l width -x -d 'thumbnail width in points'
complete -c thumbpipe -n $run -l height -x -d 'thumbnail height in points'
complete -c thumbpipe -n $run -l scale -x -d 'pixels per point'
complete -c thumbpipe -n $run -l corner-radius -x -d 'corner radius in points'
complete -c thumbpipe -n $run -l quality -x -d 'store JPEG quality, 0-1 or 1-100'
complete -c thumbpipe -n $run -l max-pixels -x -d 'refuse sources with more pixels'
complete -c thumbpipe -n $run -l fail-on -x -a 'none truncated error warning' -d 'decode strictness'
complete -c thumbpipe -n $run -l formats -x -a "(__thumbpipe_formats $formats)" -d 'loaders a source may use'
complete -c thumbpipe -n $run -l timeout -x -d 'seconds one item may take'
complete -c thumbpipe -n $run -l set -x -d 'any pipeline setting'
complete -c thumbpipe -n $run -l no-html -d 'do not write report.html'
complete -c thumbpipe -n $run -l log -r -F -d 'one JSON line per item'
complete -c thumbpipe -n $run -l trace -r -F -d 'write a Chrome trace'
complete -c thumbpipe -n $run -l trace-sample -x -d 'with --trace, trace one item in N'
complete -c thumbpipe -n $run -l metrics -r -F -d 'write Prometheus textfile metrics'
complete -c thumbpipe -n $run -l collection -x -d 'the collection label of the metrics'
complete -c thumbpipe -n $run -l force -d 'redo every item'
complete -c thumbpipe -n $run -l dry-run -d 'print what a run would do'
complete -c thumbpipe -n $run -l json -d 'with --dry-run: as JSON'
complete -c thumbpipe -n $run -l max-removed -x -d 'refuse removing more than N or P%'
complete -c thumbpipe -n $run -l verify-content -d 're-hash sources and store files'
complete -c thumbpipe -n $run -l exit-on-failure -x -a 'any new' -d 'exit 1 on any failure, or only on new ones'
complete -c thumbpipe -n $run -l prune-missing -d 'drop the outputs of items whose photo is missing'
complete -c thumbpipe -n $run -l prefer-exif-date -d 'prefer a photo\'s EXIF date to its Takeout sidecar\'s'
complete -c thumbpipe -n $run -l time-zone -x -d 'the zone of photo times without an offset'
complete -c thumbpipe -n $run -l rebuild-state -d 'rebuild a damaged or lost state from the archive and store files'
complete -c thumbpipe -n $run -l sandbox -x -a 'required auto off' -d 'how workers are confined'
complete -c thumbpipe -n $run -l shard -x -d 'only shard K of N'
complete -c thumbpipe -n $run -l run-id -x -d 'the run this part belongs to'
# END generated run options

# scan
set -l scan "__fish_seen_subcommand_from scan"
complete -c thumbpipe -n $scan -a '(__fish_complete_directories)'
complete -c thumbpipe -n $scan -s o -l output -r -F -d 'write the manifest there'
complete -c thumbpipe -n $scan -s r -l recursive -d 'look in sub-folders too'
complete -c thumbpipe -n $scan -l ext -x -d 'only these extensions'
complete -c thumbpipe -n $scan -l force -d 'overwrite an existing manifest'
complete -c thumbpipe -n $scan -l update -r -F -d 'add new photos to an existing manifest'
complete -c thumbpipe -n $scan -l no-metadata -d 'read no photo: name items by their file names'
complete -c thumbpipe -n $scan -s j -l jobs -x -d 'workers reading titles and descriptions'

# inspect, extract, report
complete -c thumbpipe -n "__fish_seen_subcommand_from inspect extract report" -F
complete -c thumbpipe -n "__fish_seen_subcommand_from inspect" -l json -d 'one JSON object per item'
complete -c thumbpipe -n "__fish_seen_subcommand_from report" -s o -l output -r -F -d 'where to write the page'
complete -c thumbpipe -n "__fish_seen_subcommand_from report" -l against -r -F -d 'compare with another run'

# contact-sheet
set -l sheet "__fish_seen_subcommand_from contact-sheet"
complete -c thumbpipe -n $sheet -F
complete -c thumbpipe -n $sheet -s o -l output -r -F -d 'the first sheet\'s path'
complete -c thumbpipe -n $sheet -l columns -x -d 'thumbnails per row'
complete -c thumbpipe -n $sheet -l per-sheet -x -d 'items per sheet'

# merge
set -l merge "__fish_seen_subcommand_from merge"
complete -c thumbpipe -n $merge -a '(__fish_complete_directories)'
complete -c thumbpipe -n $merge -s o -l output -r -F -d 'merged output folder'
complete -c thumbpipe -n $merge -l run-id -x -d 'merge only parts of this run'
complete -c thumbpipe -n $merge -l wait -x -d 'seconds to wait for parts'

# pipeline
complete -c thumbpipe -n "__fish_seen_subcommand_from pipeline; and not __fish_seen_subcommand_from show list" -a 'show list'
complete -c thumbpipe -n "__fish_seen_subcommand_from show" -a '(thumbpipe pipeline list -q 2>/dev/null | cut -f1)'
