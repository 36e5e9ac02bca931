#!/usr/bin/env nextflow
/*
 * genimpute scattered over chunks: the panel converted once -> (train) ->
 * chunks -> impute per chunk -> bcftools concat + index. Every step reads
 * the compact panel: read from the VCF, a large panel is parsed again by
 * each job.
 *
 *   nextflow run workflows/nextflow/main.nf --panel panel.vcf.gz --targets targets.vcf.gz \
 *       --model pretrained           # or a model directory, or --array sites.txt to train one first
 *       [--map genetic.map] [--chunk_size 5Mb] [--outdir results] -profile docker
 *
 * On a cluster, pick an executor in nextflow.config (e.g. process.executor = 'slurm').
 */
nextflow.enable.dsl = 2

include { GENIMPUTE_PANEL  } from './modules/local/genimpute/panel/main'
include { GENIMPUTE_TRAIN  } from './modules/local/genimpute/train/main'
include { GENIMPUTE_CHUNKS } from './modules/local/genimpute/chunks/main'
include { GENIMPUTE_IMPUTE } from './modules/local/genimpute/impute/main'

params.panel      = null
params.targets    = null
params.array      = null
params.model      = null   // a model directory, or 'pretrained': the copying engine, no training
params.map        = null   // PLINK or shapeit4 genetic map; none: 1 cM per Mb
params.chunk_size = '5Mb'
params.outdir     = 'genimpute_results'

process CONCAT {
    tag "$meta.id"
    label 'process_single'
    container 'genimpute:0.2.0'
    publishDir params.outdir, mode: 'copy'

    input:
    tuple val(meta), path(vcfs), path(indexes)

    output:
    tuple val(meta), path("${meta.id}.imputed.vcf.gz"), path("${meta.id}.imputed.vcf.gz.tbi")

    script:
    // chunk files arrive sorted by their index in the chunk list
    """
    bcftools concat -Oz -o ${meta.id}.imputed.vcf.gz ${vcfs.join(' ')}
    tabix -p vcf ${meta.id}.imputed.vcf.gz
    """
}

workflow {
    if (!params.panel || !params.targets) {
        error "expected --panel and --targets"
    }
    if (!params.model && !params.array) {
        error "expected --model (a trained model directory, or 'pretrained') or --array (to train one)"
    }
    def panel_vcf = Channel.value([[id: 'panel'], file(params.panel), file(params.panel + '.tbi')])
    def genetic_map = params.map ? file(params.map) : []
    def panel = GENIMPUTE_PANEL(panel_vcf, genetic_map).panel
    def model = params.model == 'pretrained'
        ? Channel.value([])
        : params.model
        ? Channel.value(file(params.model, type: 'dir'))
        : GENIMPUTE_TRAIN(panel, file(params.array), genetic_map).model.map { meta, dir -> dir }

    def regions = GENIMPUTE_CHUNKS(panel, params.chunk_size).chunks
        .flatMap { meta, list -> list.readLines().findAll { it.trim() }.withIndex() }

    def target = file(params.targets)
    def jobs = regions.map { region, i -> [[id: target.simpleName, chunk: i], target, file(params.targets + '.tbi'), region] }
    def imputed = GENIMPUTE_IMPUTE(jobs, model, panel.map { meta, compact -> compact }, genetic_map).vcf

    def gathered = imputed
        .map { meta, vcf, tbi -> [meta.id, meta.chunk, vcf, tbi] }
        .groupTuple()
        .map { id, chunks, vcfs, tbis ->
            def order = (0..<chunks.size()).sort { chunks[it] }
            [[id: id], order.collect { vcfs[it] }, order.collect { tbis[it] }]
        }
    CONCAT(gathered)
}
