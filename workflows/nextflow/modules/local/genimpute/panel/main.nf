process GENIMPUTE_PANEL {
    tag "$meta.id"
    label 'process_medium'  // every other process waits for it: two cores inflate and pack the panel
    container 'genimpute:0.2.0'

    input:
    tuple val(meta), path(panel), path(panel_index)
    path genetic_map

    output:
    tuple val(meta), path("${prefix}.gpanel"), emit: panel
    path "versions.yml"                      , emit: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    def map_arg = genetic_map ? "--map ${genetic_map}" : ''
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    genimpute panel ${panel} --out ${prefix}.gpanel --threads ${task.cpus} ${map_arg} ${args}

    cat <<-END_VERSIONS > versions.yml
    "${task.process}":
        genimpute: \$(genimpute --version | sed 's/^genimpute, version //')
    END_VERSIONS
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}"
    """
    touch ${prefix}.gpanel
    echo '"${task.process}": {genimpute: 0.2.0}' > versions.yml
    """
}
