process GENIMPUTE_TRAIN {
    tag "$meta.id"
    label 'process_high'
    container 'genimpute:0.2.0'

    input:
    tuple val(meta), path(panel)
    path array
    path genetic_map

    output:
    tuple val(meta), path("${prefix}"), emit: model
    path "versions.yml"               , emit: versions

    when:
    task.ext.when == null || task.ext.when

    script:
    def args = task.ext.args ?: ''
    def map_arg = genetic_map ? "--map ${genetic_map}" : ''
    prefix = task.ext.prefix ?: "${meta.id}_model"
    """
    genimpute train --ref ${panel} --array ${array} --out ${prefix} --threads ${task.cpus} ${map_arg} ${args}

    cat <<-END_VERSIONS > versions.yml
    "${task.process}":
        genimpute: \$(genimpute --version | sed 's/^genimpute, version //')
    END_VERSIONS
    """

    stub:
    prefix = task.ext.prefix ?: "${meta.id}_model"
    """
    mkdir ${prefix}
    touch ${prefix}/config.json ${prefix}/model.pt ${prefix}/provenance.json ${prefix}/panel.npz
    echo '"${task.process}": {genimpute: 0.2.0}' > versions.yml
    """
}
